package main

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// requireInert fails if out holds anything a terminal would obey: a
// control character other than newline and tab, DEL, a C1 control, a
// bidi mark, or bytes that are not UTF-8.
func requireInert(t *testing.T, what, out string) {
	t.Helper()
	require.True(t, utf8.ValidString(out), "%s: output is UTF-8", what)
	for i, r := range out {
		bad := r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r < 0xa0 ||
			r == 0x200e || r == 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
		require.False(t, bad, "%s: control character %U at byte %d of\n%s", what, r, i, out)
	}
}

// A model answer, a file the model reads and the task all carry escape
// sequences (clear the screen, set the title, write the clipboard, rewrite
// the line, reverse the text): every readable output shows them as
// visible escapes, and --json keeps them exact.
func TestS2_HostileTextReachesNoTerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := writeSpec(t, dir, "hostile.yaml", `pattern: relay
workers:
  - role: writer
    provider: scripted
    script:
      - calls: [{name: fs.write, arguments: {path: evil.txt, content: "file \e]52;c;aGk=\a\e[2J\rFILE\u202e"}}]
      - text: "answer \e]0;owned\a\e[2J\rANSWER\u202e\x9b"
  - role: reviewer
    provider: scripted
    script:
      - calls: [{name: fs.read, arguments: {path: evil.txt}}]
      - text: Read it.
`)
	db := dir + "/runs.db"
	task := "task \x1b]52;c;aGk=\x07\x1b[2J\rTASK"
	e := env(t)
	run := spiceOrch(t, e, "run", spec, "--store", db, "--task", task)
	require.Equal(t, 0, run.code, run.stderr)
	requireInert(t, "run", run.stdout)
	for _, want := range []string{`task: task \x1b]52;c;aGk=\x07\x1b[2J\rTASK`, `answer \x1b]0;owned\x07\x1b[2J\rANSWER\u202e\x9b`, `file \x1b]52;c;aGk=\x07\x1b[2J FILE\u202e`} {
		require.Contains(t, run.stdout, want)
	}
	pairID := regexp.MustCompile(`runs show (pair-\S+)`).FindStringSubmatch(run.stdout)[1]

	for _, args := range [][]string{
		{"runs", "show", pairID},
		{"runs", "show", pairID + "/writer/run-1"},
		{"runs", "show", pairID + "/reviewer/run-1"},
		{"runs", "replay", pairID},
		{"runs", "replay", pairID + "/writer/run-1"},
		{"runs", "list"},
	} {
		r := spiceOrch(t, e, append(args, "--store", db)...)
		require.Equal(t, 0, r.code, r.stderr)
		requireInert(t, strings.Join(args, " "), r.stdout)
	}

	js := spiceOrch(t, e, "runs", "replay", pairID, "--json", "--store", db)
	require.Equal(t, 0, js.code)
	require.Contains(t, js.stdout, `answer \u001b]0;owned\u0007\u001b[2J\rANSWER`+"\u202e", "--json stays exact")

	// An error that quotes what a user typed is shown escaped too.
	r := spiceOrch(t, e, "runs", "show", "pair-\x1b[2J", "--store", db)
	require.Equal(t, 1, r.code)
	requireInert(t, "stderr", r.stderr)
	require.Contains(t, r.stderr, `pair-\x1b[2J: not found`)
}
