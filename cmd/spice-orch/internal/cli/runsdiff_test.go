package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readSpec is a relay whose writer reads NOTES.md from its workspace and
// answers with a fixed text: two runs on workspaces whose NOTES.md differ
// differ in that one tool result and nowhere else.
const readSpec = `version: 1
task: Read the notes.
pattern: relay
workers:
  - role: writer
    provider: scripted
    max_turns: 2
    script:
      - calls:
          - name: fs.read
            arguments: {path: NOTES.md}
        usage: {input: 10, output: 5}
      - text: Read them.
        usage: {input: 20, output: 5}
  - role: reviewer
    provider: scripted
    max_turns: 1
    script:
      - text: Fine.
        usage: {input: 10, output: 2}
`

// recordPair runs readSpec on a workspace whose NOTES.md holds notes,
// records it in db and returns its pair ID.
func recordPair(t *testing.T, dir, db, notes string) string {
	t.Helper()
	specPath := filepath.Join(dir, "read.yaml")
	require.NoError(t, os.WriteFile(specPath, []byte(readSpec), 0o600))
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "NOTES.md"), []byte(notes), 0o600))
	out, errOut, code := call(t, nil, "run", specPath, "--json", "--store", db, "--workspace", ws)
	require.Equal(t, 0, code, errOut)
	first, _, _ := strings.Cut(out, "\n")
	var l struct {
		Payload struct {
			PairID string `json:"pair_id"`
		} `json:"payload"`
	}
	require.NoError(t, json.Unmarshal([]byte(first), &l))
	require.NotEmpty(t, l.Payload.PairID)
	return l.Payload.PairID
}

func TestO7_RunsDiffOfByteIdenticalPairsReportsNoDivergence(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	a := recordPair(t, dir, db, "one")
	b := recordPair(t, dir, db, "one")

	out, errOut, code := call(t, nil, "runs", "diff", a, a, "--exact", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^the timelines match \(\d+ events\)\n$`, out)

	// Two files of the same bytes match exactly.
	replay, _, code := call(t, nil, "runs", "replay", a, "--json", "--store", db)
	require.Equal(t, 0, code)
	fa, fb := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	require.NoError(t, os.WriteFile(fa, []byte(replay), 0o600))
	require.NoError(t, os.WriteFile(fb, []byte(replay), 0o600))
	out, _, code = call(t, nil, "runs", "diff", fa, fb, "--exact")
	require.Equal(t, 0, code)
	require.Contains(t, out, "the timelines match")

	// Two runs of the same spec differ only in times and IDs.
	out, errOut, code = call(t, nil, "runs", "diff", a, b, "--store", db)
	require.Equal(t, 0, code, out+errOut)
	out, _, code = call(t, nil, "runs", "diff", a, b, "--exact", "--store", db)
	require.Equal(t, 1, code)
	require.Contains(t, out, "first divergence at event 1 ")
	require.Contains(t, out, "pair_id: A ")
}

func TestO7_RunsDiffReportsTheDifferingToolResultFirst(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	a := recordPair(t, dir, db, "one")
	b := recordPair(t, dir, db, "two")
	out, errOut, code := call(t, nil, "runs", "diff", a, b, "--store", db, "--context", "2")
	require.Equal(t, 1, code, errOut)
	lines := strings.Split(out, "\n")
	// Event 5 is the journal of the first model operation (pair.model_output).
	require.Regexp(t, `^first divergence at event 8 \(A has (\d+) events, B has \d+\)$`, lines[0])
	require.Regexp(t, `^\s+6\s+model\.completed\s+writer$`, lines[1])
	require.Regexp(t, `^\s+7\s+tool\.started\s+writer\s+fs\.read$`, lines[2])
	require.Regexp(t, `^A\s+8\s+tool\.completed\s+writer\s+fs\.read$`, lines[3])
	require.Regexp(t, `^B\s+8\s+tool\.completed\s+writer\s+fs\.read$`, lines[4])
	require.Equal(t, `      payload.content: A "one", B "two"`, lines[5], "exactly that field")
	require.Regexp(t, `^A\s+9\s+turn\.completed\s+writer$`, lines[6])
}

func TestO7_RunsDiffBadUsageExitsTwo(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	a := recordPair(t, dir, db, "one")
	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("{\"kind\":\"a\"}\nnot json\n"), 0o600))
	for name, args := range map[string][]string{
		"one argument":   {"runs", "diff", a, "--store", db},
		"unknown pair":   {"runs", "diff", a, "pair-none", "--store", db},
		"malformed file": {"runs", "diff", a, bad, "--store", db},
		"bad context":    {"runs", "diff", a, a, "--context", "-1", "--store", db},
		"no store":       {"runs", "diff", "x", "y", "--store", filepath.Join(dir, "none.db")},
	} {
		t.Run(name, func(t *testing.T) {
			_, errOut, code := call(t, nil, args...)
			require.Equal(t, 2, code, errOut)
			require.NotEmpty(t, errOut)
		})
	}
	_, errOut, _ := call(t, nil, "runs", "diff", a, bad, "--store", db)
	require.Contains(t, errOut, "B line 2: not a JSON object")
}
