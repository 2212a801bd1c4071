package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The built-in pair's writer calls fs.write twice: its draft, then its
// revision. The answers approve the first and deny the second.
func TestR1_ApproveFromDrivesARealRun(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	answers := filepath.Join(dir, "answers.jsonl")
	require.NoError(t, os.WriteFile(answers, []byte(
		`{"answer":"approve","tool":"fs.write","worker":"writer"}`+"\n"+
			`{"answer":"deny","tool":"fs.write"}`+"\n"), 0o600))
	r := spiceOrch(t, env(t), "run", "--json", "--workspace", ws, "--approve", "mutating", "--approve-from", answers)
	require.Equal(t, 0, r.code, r.stderr)
	ls := timeline(t, r.stdout)

	var questions []map[string]any
	var answered []string
	var problems []string
	for _, l := range ls {
		switch l.Kind {
		case "interaction.started":
			var q map[string]any
			require.NoError(t, json.Unmarshal([]byte(field[string](t, l.Relay.Payload, "prompt")), &q))
			questions = append(questions, q)
		case "interaction.answered":
			answered = append(answered, field[string](t, l.Relay.Payload, "answer"))
		case "tool.completed":
			if field[string](t, l.Relay.Payload, "name") == "fs.write" {
				p := field[map[string]string](t, l.Relay.Payload, "problem")
				problems = append(problems, p["code"])
			}
		}
	}
	// Only the mutating tool asks: fs.read and text.stats run unasked.
	require.Len(t, questions, 2)
	for i, q := range questions {
		require.Equal(t, "writer", q["worker"])
		require.Equal(t, "fs.write", q["tool"])
		require.Equal(t, "mutating", q["effect"])
		require.Equal(t, "idempotent", q["replay"])
		require.Equal(t, "draft.md", q["arguments"].(map[string]any)["path"])
		want := "approve:"
		if i == 1 {
			want = "deny:"
		}
		require.Equal(t, want+q["digest"].(string), answered[i], "each answer is bound to its question's digest")
	}
	require.Equal(t, []string{"", "approval_denied"}, problems)

	// The approved draft is on disk; the denied revision never was.
	draft, err := os.ReadFile(filepath.Join(ws, "draft.md"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(draft), "# Small packages"))
	require.NotContains(t, string(draft), "## Example")
}
