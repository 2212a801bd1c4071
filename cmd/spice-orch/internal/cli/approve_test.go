package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestR1_RunRefusesApprovalsNobodyCanAnswer(t *testing.T) {
	dir := t.TempDir()
	answers := filepath.Join(dir, "answers.jsonl")
	require.NoError(t, os.WriteFile(answers, []byte(`{"answer":"approve"}`+"\n"), 0o600))
	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(`{"answer":"approve"}`+"\n\n"+`{"answer":"yes"}`+"\n"), 0o600))
	spec := filepath.Join(dir, "approve.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(validSpec+"approve: mutating\n"), 0o600))
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"--json": {[]string{"run", "--approve", "mutating", "--json", "--no-store"},
			"--approve mutating asks a person before those tools run, but --json leaves no terminal to ask on: give the answers with --approve-from FILE (JSON lines), or run on a terminal without --json"},
		"no terminal": {[]string{"run", "--approve", "all", "--no-store"},
			"--approve all asks a person before those tools run, but standard input is not a terminal"},
		"the spec's policy": {[]string{"run", spec, "--json", "--no-store"},
			"--approve mutating asks a person before those tools run, but --json leaves no terminal"},
		"a bad policy":        {[]string{"run", "--approve", "fs.write,,x", "--no-store"}, "--approve: want never, mutating, all, or tool names"},
		"answers for nothing": {[]string{"run", "--approve-from", answers, "--no-store"}, "--approve-from: no call waits for approval"},
		"a bad timeout":       {[]string{"run", "--approve", "all", "--approve-timeout", "0s", "--approve-from", answers, "--no-store"}, "--approve-timeout: must be between"},
		"a bad answer":        {[]string{"run", "--approve", "all", "--approve-from", bad, "--no-store"}, bad + ":3: answer: want approve or deny"},
		"a missing file":      {[]string{"run", "--approve", "all", "--approve-from", filepath.Join(dir, "none"), "--no-store"}, "--approve-from: open"},
	} {
		t.Run(name, func(t *testing.T) {
			out, errOut, code := call(t, nil, c.args...)
			require.Equal(t, ExitUsage, code, errOut)
			require.Contains(t, errOut, c.want)
			require.Empty(t, out, "nothing started")
		})
	}
	// The spec's policy with answers from a file runs.
	out, errOut, code := call(t, nil, "run", spec, "--json", "--no-store", "--approve-from", answers)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"interaction.answered"`)
}

func TestR1_AnswersFileIsDecodedStrictly(t *testing.T) {
	got, err := decodeAnswers("a", []byte(`{"answer":"approve","tool":"fs.write"}`+"\n  \n"+`{"answer":"deny","call":"c","worker":"w","digest":"d"}`))
	require.NoError(t, err)
	require.Equal(t, []answerLine{{Answer: "approve", Tool: "fs.write"}, {Answer: "deny", Call: "c", Worker: "w", Digest: "d"}}, got)
	for _, bad := range []string{`{"answer":"approve","colour":1}`, `{"answer":"approve"} {}`, `[]`, `{"answer":"maybe"}`, `{`,
		strings.Repeat(" ", maxAnswersBytes+1)} {
		_, err := decodeAnswers("a", []byte(bad))
		require.Error(t, err, bad)
	}
}

func FuzzDecodeAnswers(f *testing.F) {
	f.Add([]byte(`{"answer":"approve"}` + "\n" + `{"answer":"deny","tool":"x"}`))
	f.Add([]byte("{\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeAnswers("f", data)
		if err != nil {
			return
		}
		for _, a := range got {
			require.Contains(t, []string{"approve", "deny"}, a.Answer)
			_, err := json.Marshal(a)
			require.NoError(t, err)
		}
	})
}
