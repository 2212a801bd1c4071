package spec_test

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/bound"
)

// TestS2_ShownSpecHoldsNoSecret: a spec shown to a reader keeps its
// workers, models and the names of an MCP server's environment, and
// shows no value that may be a secret (env values, argument values, a
// URL's user, password and query) in any encoding: as it is, in base64 or escaped
// for JSON.
func TestS2_ShownSpecHoldsNoSecret(t *testing.T) {
	const key = "sk-shown-0123456789abcdef"
	pin := strings.Repeat("a", 64)
	body := `version: 1
name: shown
pattern: relay
workers:
  - role: writer
    provider: openai
    model: gpt-test
    system: "Write <b>well</b>"
  - role: reviewer
    provider: scripted
    script:
      - text: fine
mcp_servers:
  - name: local
    path: /bin/server
    sha256: "` + pin + `"
    env: ["API_TOKEN=` + key + `", "LOG=` + key + `\"x"]
    args: ["--api-key=` + key + `", "--token", "` + key + `", "-v", "{workspace}", "-p` + key + `", "--` + key + `", "` + key + `"]
  - name: remote
    url: "https://user:` + key + `@mcp.example/v1?token=` + key + `#` + key + `"
`
	s, err := spec.Decode("s.yaml", []byte(body))
	require.NoError(t, err)
	b, err := s.Shown().JSON()
	require.NoError(t, err)
	require.True(t, json.Valid(b))
	text := string(b)
	for _, form := range []string{key, base64.StdEncoding.EncodeToString([]byte(key)), strings.TrimSuffix(mustJSON(t, key), `"`)[1:]} {
		require.NotContains(t, text, form)
	}
	for _, want := range []string{`"role":"writer"`, `"model":"gpt-test"`, `"provider":"openai"`, `"API_TOKEN=[redacted]"`,
		`"url":"https://[redacted]@mcp.example/v1?[redacted]#[redacted]"`,
		`"args":["--api-key=[redacted]","--token","[redacted]","-v","{workspace}","[redacted]","[redacted]","[redacted]"]`, `"system":"Write <b>well</b>"`, `"script":[{"text":"fine"}]`} {
		require.Contains(t, text, want)
	}
}

// TestS2_ShownSpecIsBounded: scripts too long to show are shown by their
// step counts.
func TestS2_ShownSpecIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\npattern: relay\nworkers:\n  - role: writer\n    provider: scripted\n    script:\n")
	for range 200 {
		b.WriteString("      - text: \"" + strings.Repeat("x", 4000) + "\"\n")
	}
	b.WriteString("  - role: reviewer\n    provider: scripted\n    script:\n      - text: fine\n")
	s, err := spec.Decode("s.yaml", []byte(b.String()))
	require.NoError(t, err)
	out, err := s.Shown().JSON()
	require.NoError(t, err)
	require.LessOrEqual(t, len(out), spec.MaxShownBytes)
	require.Contains(t, string(out), `"script":"200 steps"`)
	require.Contains(t, string(out), `"script":"1 step"`)

	// Texts whose JSON is longer than they are: a task and system
	// prompts at their bounds, of backslashes, each escaped as two.
	long := func(n int) string { return "'" + strings.Repeat(`\`, n) + "'" }
	body := "version: 1\nname: long\npattern: relay\ntask: " + long(bound.MaxMessageBytes) +
		"\nworkers:\n  - role: writer\n    provider: scripted\n    system: " + long(bound.MaxSystemPromptBytes) +
		"\n    script:\n      - text: done\n  - role: reviewer\n    provider: scripted\n    system: " + long(bound.MaxSystemPromptBytes) +
		"\n    script:\n      - text: fine\nhandoff:\n  headings:\n    writer: " + long(128) + "\n    reviewer: " + long(128) + "\n"
	s, err = spec.Decode("s.yaml", []byte(body))
	require.NoError(t, err)
	out, err = s.Shown().JSON()
	require.NoError(t, err)
	require.LessOrEqual(t, len(out), spec.MaxShownBytes)
	require.True(t, json.Valid(out))
	var v struct {
		Name    string `json:"name"`
		Task    string `json:"task"`
		Workers []struct {
			Role, System string
		} `json:"workers"`
	}
	require.NoError(t, json.Unmarshal(out, &v))
	require.Equal(t, "long", v.Name)
	require.True(t, strings.HasPrefix(v.Task, `\\\\`), "the task's start is shown")
	require.Contains(t, v.Task, " more bytes not shown]", "the cut is marked")
	require.Len(t, v.Workers, 2)
	for _, w := range v.Workers {
		require.Contains(t, w.System, " more bytes not shown]", w.Role)
	}

	// Lists of the most files a spec may name: too long to show even with
	// the texts cut, the spec is shown by its workers, and says so.
	b.Reset()
	b.WriteString("version: 1\nname: files\npattern: relay\nworkers:\n  - role: writer\n    provider: scripted\n    script:\n      - text: a\n" +
		"  - role: reviewer\n    provider: scripted\n    model: m-1\n    script:\n      - text: b\nplugins:\n")
	for i := range spec.MaxPlugins {
		b.WriteString("  - path: /p/" + strconv.Itoa(i) + "\n    sha256: \"" + strings.Repeat("a", 64) + "\"\n    root: /r\n    files:\n")
		for j := range spec.MaxPluginFiles {
			b.WriteString("      - " + strings.Repeat("d/", 500) + strconv.Itoa(j) + "\n")
		}
	}
	s, err = spec.Decode("s.yaml", []byte(b.String()))
	require.NoError(t, err)
	out, err = s.Shown().JSON()
	require.NoError(t, err)
	require.LessOrEqual(t, len(out), spec.MaxShownBytes)
	require.JSONEq(t, `{"version":1,"name":"files","pattern":"relay","workers":[`+
		`{"role":"writer","provider":"scripted","model":"scripted-1","max_turns":8},{"role":"reviewer","provider":"scripted","model":"m-1","max_turns":8}],`+
		`"limits":{},"omitted":"the rest of the spec is over 262144 bytes when shown"}`, string(out))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
