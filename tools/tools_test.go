package tools_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/tools"
)

func TestTextStats_CountsWordsLinesAndRunes(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		text string
		want tools.Stats
	}{
		{"", tools.Stats{}},
		{"hello world", tools.Stats{Words: 2, Lines: 1, Characters: 11}},
		{"a\nb\n", tools.Stats{Words: 2, Lines: 2, Characters: 4}},
		{"a\nb", tools.Stats{Words: 2, Lines: 2, Characters: 3}},
		{"  \n\n", tools.Stats{Words: 0, Lines: 2, Characters: 4}},
		{"héllo wörld 🌍\n", tools.Stats{Words: 3, Lines: 1, Characters: 14}},
		{"日本語\u3000テキスト", tools.Stats{Words: 2, Lines: 1, Characters: 8}},
		{"tab\tseparated\u00a0words", tools.Stats{Words: 3, Lines: 1, Characters: 19}},
	}
	for _, c := range cases {
		require.Equal(t, c.want, tools.Count(c.text), "%q", c.text)
		var got map[string]int
		require.NoError(t, json.Unmarshal([]byte(e.ok(t, "text.stats", args("text", c.text))), &got))
		require.Equal(t, map[string]int{"words": c.want.Words, "lines": c.want.Lines, "characters": c.want.Characters}, got)
	}
	require.Equal(t, `{"words":2,"lines":1,"characters":11}`, e.ok(t, "text.stats", args("text", "hello world")))
}

func TestArguments_BadArgumentsAreInvalidArgumentsProblems(t *testing.T) {
	e := newEnv(t)
	e.write(t, "f.txt", "x")
	cases := []struct{ name, args string }{
		{"fs.read", `{}`},
		{"fs.read", `{"path":1}`},
		{"fs.read", `{"path":null}`},
		{"fs.read", `{"path":["f.txt"]}`},
		{"fs.read", `{"path":"f.txt","extra":"x"}`},
		{"fs.read", `{"path":"f.txt","path":"f.txt"}`},
		{"fs.read", `{"Path":"f.txt"}`},
		{"fs.write", `{"path":"f.txt"}`},
		{"fs.write", `{"content":"x"}`},
		{"fs.write", `{"path":"f.txt","content":{"a":1}}`},
		{"fs.write", `{"path":"f.txt","content":"x","mode":"0777"}`},
		{"text.stats", `{}`},
		{"text.stats", `{"text":true}`},
		{"text.stats", `{"text":"x","lang":"en"}`},
	}
	for _, c := range cases {
		t.Run(c.name+c.args, func(t *testing.T) { e.problem(t, tools.CodeInvalidArguments, c.name, c.args) })
	}
	require.Equal(t, "x", e.read(t, "f.txt"))
}

func TestArguments_ProblemsNameTheArgumentNotTheValue(t *testing.T) {
	e := newEnv(t)
	r, err := e.call(t, "fs.read", `{"path":"x","sk-secret value":"y"}`)
	require.NoError(t, err)
	p, _ := r.Problem()
	require.NotContains(t, p.Message(), "sk-secret")
	r, err = e.call(t, "fs.read", `{"path":"x","extra":"sk-secret"}`)
	require.NoError(t, err)
	p, _ = r.Problem()
	require.Contains(t, p.Message(), `"extra"`)
	require.NotContains(t, p.Message(), "sk-secret")
	r, err = e.call(t, "fs.write", `{"path":"x"}`)
	require.NoError(t, err)
	p, _ = r.Problem()
	require.Contains(t, p.Message(), `"content"`)
}

func TestK4_DefinitionsAreHonest(t *testing.T) {
	ts, err := tools.New(tools.Config{Root: t.TempDir()})
	require.NoError(t, err)
	type want struct {
		effect   tool.Effect
		replay   tool.Replay
		caps     []tool.Capability
		required []string
	}
	wants := map[string]want{
		tools.NameFSRead:    {tool.ReadOnly, tool.Safe, []tool.Capability{tool.FilesystemRead}, []string{"path"}},
		tools.NameFSWrite:   {tool.Mutating, tool.Idempotent, []tool.Capability{tool.FilesystemWrite}, []string{"path", "content"}},
		tools.NameTextStats: {tool.ReadOnly, tool.Safe, nil, []string{"text"}},
	}
	var names []string
	for _, tl := range ts {
		d := tl.Definition()
		names = append(names, d.Name())
		w, ok := wants[d.Name()]
		require.True(t, ok, d.Name())
		require.Equal(t, w.effect, d.Effect(), d.Name())
		require.Equal(t, w.replay, d.Replay(), d.Name())
		require.Equal(t, w.caps, slices.Collect(d.Capabilities()), d.Name())
		require.NotEmpty(t, d.Description())

		var schema struct {
			Type                 string                     `json:"type"`
			Properties           map[string]json.RawMessage `json:"properties"`
			Required             []string                   `json:"required"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
		}
		require.NoError(t, json.Unmarshal(d.Schema(), &schema))
		require.Equal(t, "object", schema.Type)
		require.Equal(t, w.required, schema.Required)
		require.Len(t, schema.Properties, len(w.required))
		require.NotNil(t, schema.AdditionalProperties)
		require.False(t, *schema.AdditionalProperties)
	}
	require.Equal(t, []string{"fs.read", "fs.write", "text.stats"}, names)
	// The definitions are what the kernel's dispatcher freezes (K6).
	_, err = tool.NewDispatcher(tool.DispatcherConfig{Tools: ts})
	require.NoError(t, err)
}

func TestConfig_RootAndLimitsAreValidated(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	cases := []struct {
		cfg   tools.Config
		field string
		rule  bound.Rule
	}{
		{tools.Config{}, "tools.root", bound.Required},
		{tools.Config{Root: filepath.Join(dir, "missing")}, "tools.root", bound.Malformed},
		{tools.Config{Root: file}, "tools.root", bound.Malformed},
		{tools.Config{Root: dir, MaxReadBytes: -1}, "tools.max_read_bytes", bound.Malformed},
		{tools.Config{Root: dir, MaxReadBytes: bound.MaxToolResultBytes + 1}, "tools.max_read_bytes", bound.TooLarge},
		{tools.Config{Root: dir, MaxWriteBytes: -1}, "tools.max_write_bytes", bound.Malformed},
		{tools.Config{Root: dir, MaxWriteBytes: bound.MaxToolArgumentsBytes + 1}, "tools.max_write_bytes", bound.TooLarge},
	}
	for _, c := range cases {
		_, err := tools.New(c.cfg)
		var be *bound.Error
		require.ErrorAs(t, err, &be)
		require.Equal(t, c.field, be.Field)
		require.Equal(t, c.rule, be.Rule)
		_, err = tools.NewFSRead(c.cfg)
		require.ErrorAs(t, err, &be)
		_, err = tools.NewFSWrite(c.cfg)
		require.ErrorAs(t, err, &be)
	}
}

func TestConfig_RootIsResolvedOnce(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	require.NoError(t, os.Mkdir(real, 0o755))
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(real, link))
	w, err := tools.NewFSWrite(tools.Config{Root: link})
	require.NoError(t, err)

	// Pointing the link elsewhere later does not move the workspace.
	other := filepath.Join(base, "other")
	require.NoError(t, os.Mkdir(other, 0o755))
	require.NoError(t, os.Remove(link))
	require.NoError(t, os.Symlink(other, link))
	c, err := tool.NewCall("c1", "fs.write", []byte(args("path", "a.txt", "content", "x")))
	require.NoError(t, err)
	_, err = w.Execute(t.Context(), c, nil)
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(real, "a.txt"))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(other, "a.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.False(t, strings.Contains(real, "link"))
}
