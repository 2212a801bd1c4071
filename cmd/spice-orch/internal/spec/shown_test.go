package spec_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
)

// TestS2_ShownSpecHoldsNoSecret: a spec shown to a reader keeps its
// workers, models and the names of an MCP server's environment, and
// shows no value that may be a secret (env values, a URL's user,
// password and query) in any encoding: as it is, in base64 or escaped
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
		`"url":"https://[redacted]@mcp.example/v1?[redacted]#[redacted]"`, `"system":"Write <b>well</b>"`, `"script":[{"text":"fine"}]`} {
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
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
