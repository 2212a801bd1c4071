//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestR2_RunsResumeAnswersFromAFile: a pair run with an approval policy
// and killed once its first question is printed resumes under the same
// policy; with --json it refuses to start without someone to answer, and
// --approve-from (the format of run --approve-from) gives the answers.
// The question asked again, if it was left waiting, has the recorded
// digest.
func TestR2_RunsResumeAnswersFromAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := env(t)
	answers := filepath.Join(dir, "answers.jsonl")
	require.NoError(t, os.WriteFile(answers, []byte(strings.Repeat(`{"answer":"approve","tool":"fs.write"}`+"\n", 4)), 0o600))
	run := func(name string) []string {
		return []string{"run", "--json", "--approve", "mutating", "--approve-from", answers,
			"--store", filepath.Join(dir, name+".db"), "--workspace", filepath.Join(dir, name)}
	}
	full := spiceOrch(t, e, run("whole")...)
	require.Equal(t, 0, full.code, full.stderr)
	k := 0
	for i, l := range strings.Split(full.stdout, "\n") {
		if strings.Contains(l, `"interaction.started"`) {
			k = i + 1
			break
		}
	}
	require.Positive(t, k)

	printed, killed := killedAfter(t, e, k, run("cut")...)
	require.True(t, killed)
	pairID := field[string](t, timelineHead(t, string(printed)).Payload, "pair_id")
	db := filepath.Join(dir, "cut.db")
	before := spiceOrch(t, e, "runs", "replay", pairID, "--json", "--store", db)
	require.Equal(t, 0, before.code, before.stderr)
	var asked []string
	answered := 0
	for _, l := range timelineLines(t, before.stdout) {
		switch l.Kind {
		case "interaction.started":
			asked = append(asked, field[string](t, l.Relay.Payload, "prompt"))
		case "interaction.answered":
			answered++
		}
	}
	require.NotEmpty(t, asked)

	r := spiceOrch(t, e, "runs", "resume", pairID, "--json", "--store", db)
	require.Equal(t, 2, r.code, "nobody could answer: %s", r.stderr)
	require.Contains(t, r.stderr, "--approve-from")

	r = spiceOrch(t, e, "runs", "resume", pairID, "--json", "--store", db, "--approve-from", answers)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"kind":"pair.completed"`)
	t.Logf("questions recorded %d, answered %d", len(asked), answered)
	if answered < len(asked) {
		// The first question was left waiting: it is asked again, about
		// the same call, with the same digest.
		var again []string
		for _, l := range timelineLines(t, r.stdout) {
			if l.Kind == "interaction.started" {
				again = append(again, field[string](t, l.Relay.Payload, "prompt"))
			}
		}
		require.NotEmpty(t, again)
		require.Equal(t, asked[len(asked)-1], again[0])
	}
	draft, err := os.ReadFile(filepath.Join(dir, "cut", "draft.md"))
	require.NoError(t, err)
	whole, err := os.ReadFile(filepath.Join(dir, "whole", "draft.md"))
	require.NoError(t, err)
	require.Equal(t, string(whole), string(draft))
}
