package openai_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/providers/openai"
)

// requireSameBody asserts that the body the provider sends for req and the
// body the client library's params encoding sends are equal as JSON.
func requireSameBody(t *testing.T, p *openai.Provider, req model.Request) {
	t.Helper()
	ours, err := openai.RequestBody(p, req)
	require.NoError(t, err)
	require.True(t, json.Valid(ours), "%s", ours)
	lib, err := openai.LibraryRequestBody(p, req)
	require.NoError(t, err)
	var a, b any
	require.NoError(t, json.Unmarshal(ours, &a))
	require.NoError(t, json.Unmarshal(lib, &b))
	require.Equal(t, b, a, "ours: %s\nlibrary: %s", ours, lib)
}

func bodyProvider(t *testing.T, edit ...func(*openai.Config)) *openai.Provider {
	t.Helper()
	cfg := openai.Config{APIKey: testKey, BaseURL: "http://body.invalid/v1"}
	for _, e := range edit {
		e(&cfg)
	}
	p, err := openai.New(cfg)
	require.NoError(t, err)
	return p
}

// The request body is written by hand (body.go); it says what the library's
// own encoding of the same request says, for every request fixture and
// option the provider sends.
func TestRequestBodyMatchesTheLibrary(t *testing.T) {
	weather := must(tool.NewDefinition(tool.DefinitionConfig{
		Name: "get_weather", Description: "Current \"weather\" <for> a location & more\u2028.",
		Schema: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string","description":"é\u00e9 \\ \n"}},"required":["location"]}`),
		Effect: tool.ReadOnly, Replay: tool.Safe,
	}))
	noSchema := must(tool.NewDefinition(tool.DefinitionConfig{Name: "ns.tool.now", Effect: tool.ReadOnly, Replay: tool.Safe}))
	odd := "quote \" backslash \\ slash / tab \t nl \n cr \r nul \x00 bell \x07 del \x7f <html> & \u2028 \u2029 é 日本 🎉"
	call := must(tool.NewCall("call_1", "ns.tool.now", []byte(`{"q":"`+"\\u0000 \\\" é"+`","n":[1,2.5e3,null,true]}`)))
	bare := must(tool.NewProblemResult("call_2", problem.Must("timeout", ""), ""))
	twoParts := must(message.New(message.RoleUser, must(message.TextPart("first ")), must(message.TextPart("second \""))))
	twoTexts := must(message.New(message.RoleAssistant, must(message.TextPart("a")), must(message.TextPart("b")),
		message.CallPart(call)))

	temp0, temp2, tempOdd := 0.0, 2.0, 1.1
	small := 0.000001
	for _, tc := range []struct {
		name string
		req  model.Request
		edit func(*openai.Config)
	}{
		{"fixture", request(t), nil},
		{"fixture with temperature and max tokens", request(t), func(c *openai.Config) { x := 0.2; c.Temperature = &x; c.MaxOutputTokens = 256 }},
		{"fixture with legacy max tokens", request(t), func(c *openai.Config) { c.MaxOutputTokens = 64; c.LegacyMaxTokens = true }},
		{"temperature 0", request(t), func(c *openai.Config) { c.Temperature = &temp0 }},
		{"temperature 2", request(t), func(c *openai.Config) { c.Temperature = &temp2 }},
		{"temperature 1.1", request(t), func(c *openai.Config) { c.Temperature = &tempOdd }},
		{"temperature 1e-6", request(t), func(c *openai.Config) { c.Temperature = &small }},
		{"one user message", must(model.NewRequest(model.RequestConfig{
			Operation: "op", Model: "m", Messages: []message.Message{must(message.User("hi"))},
		})), nil},
		{"odd strings everywhere", must(model.NewRequest(model.RequestConfig{
			Operation: "op", Model: "gpt-\"odd\"\\", System: odd,
			Messages: []message.Message{
				must(message.User(odd)),
				must(message.Assistant("", call)),
				must(message.Results(must(tool.NewResult("call_1", odd)))),
				must(message.Assistant(odd)),
				must(message.User("again")),
				must(message.Assistant("", must(tool.NewCall("call_2", "get_weather", []byte(`{}`))))),
				must(message.Results(bare)),
			},
			Tools: []tool.Definition{weather, noSchema},
		})), func(c *openai.Config) { c.MaxOutputTokens = 1 << 30 }},
		{"several text parts", must(model.NewRequest(model.RequestConfig{
			Operation: "op", Model: "m", Messages: []message.Message{
				twoParts, twoTexts, must(message.Results(must(tool.NewResult("call_1", "ok")))),
			},
		})), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var edit []func(*openai.Config)
			if tc.edit != nil {
				edit = append(edit, tc.edit)
			}
			requireSameBody(t, bodyProvider(t, edit...), tc.req)
		})
	}
}

// FuzzRequestBody holds the hand-written body equal to the library's for
// arbitrary texts in every string the provider writes.
func FuzzRequestBody(f *testing.F) {
	f.Add("You are terse.", "hi \"there\"", "result\n\x01", "code", "msg <&>", `{"a":"\u2028"}`)
	f.Add("", "é", "", "x", "", `{}`)
	f.Fuzz(func(t *testing.T, system, user, content, code, msg, args string) {
		if len(system)+len(user)+len(content)+len(code)+len(msg)+len(args) > 16<<10 {
			t.Skip()
		}
		c, err := tool.NewCall("call_1", "fs.read", []byte(args))
		if err != nil {
			c = must(tool.NewCall("call_1", "fs.read", []byte(`{}`)))
		}
		var res tool.Result
		if pr, err := problem.New(code, msg); err == nil {
			res, err = tool.NewProblemResult("call_1", pr, content)
			if err != nil {
				t.Skip()
			}
		} else if res, err = tool.NewResult("call_1", content); err != nil {
			t.Skip()
		}
		u, err := message.User(user)
		if err != nil {
			t.Skip()
		}
		req, err := model.NewRequest(model.RequestConfig{
			Operation: "op", Model: "m", System: system,
			Messages: []message.Message{u, must(message.Assistant(user, c)), must(message.Results(res))},
		})
		if err != nil {
			t.Skip()
		}
		requireSameBody(t, bodyProvider(t), req)
	})
}
