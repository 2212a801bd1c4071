package model_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

func validConfig(t testing.TB) model.RequestConfig {
	return model.RequestConfig{
		Operation: "op-1",
		Model:     "gpt-4o-mini",
		System:    "You are terse.",
		Messages:  []message.Message{userMsg(t, "hello")},
		Tools:     []tool.Definition{definition(t, "read_file"), definition(t, "list_dir")},
		Metadata:  must(model.NewMetadata("openai", []byte(`{"user_tier":"free"}`))),
	}
}

func TestNewRequest_Accessors(t *testing.T) {
	cfg := validConfig(t)
	r, err := model.NewRequest(cfg)
	require.NoError(t, err)
	require.Equal(t, id.Operation("op-1"), r.Operation())
	require.Equal(t, "gpt-4o-mini", r.Model())
	require.Equal(t, "You are terse.", r.System())
	require.Equal(t, cfg.Messages, slices.Collect(r.Messages()))
	require.Equal(t, 1, r.NumMessages())
	require.Equal(t, cfg.Tools, slices.Collect(r.Tools()))
	require.Equal(t, 2, r.NumTools())
	require.Equal(t, cfg.Metadata, r.Metadata())
	require.False(t, r.IsZero())
	require.True(t, model.Request{}.IsZero())
	for range r.Tools() {
		break
	}
	for range r.Messages() {
		break
	}

	cfg.Tools, cfg.System, cfg.Metadata = nil, "", model.Metadata{}
	r, err = model.NewRequest(cfg)
	require.NoError(t, err)
	require.Equal(t, 0, r.NumTools())
	require.True(t, r.Metadata().IsZero())
}

func TestK1_RequestCopiesItsSlices(t *testing.T) {
	cfg := validConfig(t)
	r, err := model.NewRequest(cfg)
	require.NoError(t, err)
	want := slices.Collect(r.Messages())
	wantTools := slices.Collect(r.Tools())

	cfg.Messages[0] = userMsg(t, "changed")
	cfg.Tools[0] = definition(t, "write_file")
	cfg.Model = "other"
	require.Equal(t, want, slices.Collect(r.Messages()))
	require.Equal(t, wantTools, slices.Collect(r.Tools()))
	require.Equal(t, "hello", slices.Collect(r.Messages())[0].Text())
	require.Equal(t, "read_file", slices.Collect(r.Tools())[0].Name())
	require.Equal(t, "gpt-4o-mini", r.Model())
}

func TestK1_ModelValueTypesHaveNoExportedFields(t *testing.T) {
	for _, v := range []any{model.Request{}, model.Item{}, model.Metadata{}, model.Usage{},
		model.Response{}, model.ProviderError{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			require.False(t, typ.Field(i).IsExported(), "%s.%s", typ.Name(), typ.Field(i).Name)
		}
	}
}

func TestK2_RequestBounds(t *testing.T) {
	t.Run("messages", func(t *testing.T) {
		cfg := validConfig(t)
		u := userMsg(t, "x")
		cfg.Messages = slices.Repeat([]message.Message{u}, bound.MaxMessagesPerRequest)
		r, err := model.NewRequest(cfg)
		require.NoError(t, err)
		require.Equal(t, bound.MaxMessagesPerRequest, r.NumMessages())
		cfg.Messages = append(cfg.Messages, u)
		_, err = model.NewRequest(cfg)
		requireBoundError(t, err, "request.messages", bound.TooMany)
	})
	t.Run("tools", func(t *testing.T) {
		cfg := validConfig(t)
		cfg.Tools = nil
		for i := range bound.MaxToolsPerPlan + 1 {
			cfg.Tools = append(cfg.Tools, definition(t, "tool_"+strings.Repeat("x", i%3)+string(rune('a'+i%26))+string(rune('a'+i/26))))
		}
		_, err := model.NewRequest(model.RequestConfig{
			Operation: cfg.Operation, Model: cfg.Model, Messages: cfg.Messages, Tools: cfg.Tools[:bound.MaxToolsPerPlan],
		})
		require.NoError(t, err)
		_, err = model.NewRequest(cfg)
		requireBoundError(t, err, "request.tools", bound.TooMany)
	})
	t.Run("system", func(t *testing.T) {
		cfg := validConfig(t)
		cfg.System = strings.Repeat("s", bound.MaxSystemPromptBytes)
		r, err := model.NewRequest(cfg)
		require.NoError(t, err)
		require.Len(t, r.System(), bound.MaxSystemPromptBytes)
		cfg.System += "s"
		_, err = model.NewRequest(cfg)
		requireBoundError(t, err, "request.system", bound.TooLarge)
	})
	t.Run("model", func(t *testing.T) {
		cfg := validConfig(t)
		cfg.Model = strings.Repeat("m", bound.MaxNameBytes)
		_, err := model.NewRequest(cfg)
		require.NoError(t, err)
		cfg.Model += "m"
		_, err = model.NewRequest(cfg)
		requireBoundError(t, err, "request.model", bound.TooLarge)
	})
}

func TestNewRequest_ModelNames(t *testing.T) {
	cfg := validConfig(t)
	for _, name := range []string{"gpt-4o-mini", "llama3.1:8b", "meta-llama/Llama-3-8B", "claude-3-5-sonnet@20240620", "a"} {
		cfg.Model = name
		_, err := model.NewRequest(cfg)
		require.NoError(t, err, name)
	}
	for _, name := range []string{"gpt 4", "gpt\t4", "modèle", "a\x00", "\x7f"} {
		cfg.Model = name
		_, err := model.NewRequest(cfg)
		requireBoundError(t, err, "request.model", bound.Malformed)
	}
	cfg.Model = ""
	_, err := model.NewRequest(cfg)
	requireBoundError(t, err, "request.model", bound.Required)
}

func TestNewRequest_RejectsBadInput(t *testing.T) {
	c1, c2 := newCall(t, "c1", ""), newCall(t, "c2", "")
	asst := must(message.Assistant("", c1, c2))
	r1 := must(message.Results(must(tool.NewResult("c1", "one"))))
	r2 := must(message.Results(must(tool.NewResult("c2", "two"))))
	rBoth := must(message.Results(must(tool.NewResult("c1", "1")), must(tool.NewResult("c2", "2"))))
	rOther := must(message.Results(must(tool.NewResult("c9", "?"))))
	u := userMsg(t, "go")

	for _, tc := range []struct {
		name  string
		edit  func(*model.RequestConfig)
		field string
		rule  bound.Rule
	}{
		{"no operation", func(c *model.RequestConfig) { c.Operation = "" }, "request.operation", bound.Required},
		{"bad operation", func(c *model.RequestConfig) { c.Operation = "op 1" }, "request.operation", bound.Malformed},
		{"system not UTF-8", func(c *model.RequestConfig) { c.System = "\xff" }, "request.system", bound.Malformed},
		{"no messages", func(c *model.RequestConfig) { c.Messages = nil }, "request.messages", bound.Required},
		{"zero message", func(c *model.RequestConfig) { c.Messages = append(c.Messages, message.Message{}) }, "request.messages[1]", bound.Required},
		{"zero first message", func(c *model.RequestConfig) { c.Messages = []message.Message{{}} }, "request.messages[0]", bound.Required},
		{"assistant first", func(c *model.RequestConfig) { c.Messages = []message.Message{asst, r1} }, "request.messages[0].role", bound.Conflict},
		{"tool first", func(c *model.RequestConfig) { c.Messages = []message.Message{r1} }, "request.messages[0].role", bound.Conflict},
		{"tool after user", func(c *model.RequestConfig) { c.Messages = []message.Message{u, r1} }, "request.messages[1]", bound.Conflict},
		{"unasked result", func(c *model.RequestConfig) { c.Messages = []message.Message{u, asst, rOther} }, "request.messages[2].parts[0].tool_result.call_id", bound.Conflict},
		{"answered twice", func(c *model.RequestConfig) { c.Messages = []message.Message{u, asst, rBoth, r2} }, "request.messages[3].parts[0].tool_result.call_id", bound.Conflict},
		{"answer after user", func(c *model.RequestConfig) { c.Messages = []message.Message{u, asst, u, r1} }, "request.messages[3]", bound.Conflict},
		{"zero tool", func(c *model.RequestConfig) { c.Tools = append(c.Tools, tool.Definition{}) }, "request.tools[2]", bound.Required},
		{"duplicate tool", func(c *model.RequestConfig) { c.Tools = append(c.Tools, definition(t, "read_file")) }, "request.tools[2].name", bound.Malformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig(t)
			tc.edit(&cfg)
			r, err := model.NewRequest(cfg)
			requireBoundError(t, err, tc.field, tc.rule)
			require.True(t, r.IsZero())
		})
	}

	// A well-formed tool round passes.
	cfg := validConfig(t)
	cfg.Messages = []message.Message{u, asst, r1, r2, must(message.Assistant("done")), u}
	_, err := model.NewRequest(cfg)
	require.NoError(t, err)
}

func BenchmarkNewRequest(b *testing.B) {
	c1 := newCall(b, "c1", `{"path":"a.txt"}`)
	cfg := model.RequestConfig{
		Operation: "op-1",
		Model:     "gpt-4o-mini",
		System:    "You are terse.",
		Messages: []message.Message{
			userMsg(b, "read a.txt"),
			must(message.Assistant("", c1)),
			must(message.Results(must(tool.NewResult("c1", "contents")))),
		},
		Tools: []tool.Definition{definition(b, "read_file"), definition(b, "list_dir")},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := model.NewRequest(cfg); err != nil {
			b.Fatal(err)
		}
	}
}
