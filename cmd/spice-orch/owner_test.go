package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var pairIDPattern = regexp.MustCompile(`pair-\d{8}-\d{6}-[0-9a-f]{8}`)

// Two real processes: `runs list` and `runs show`,
// writable or read-only, run while another process is playing a pair in
// the same store, show that pair running and its started call as not
// uncertain; once that process is killed, they show it interrupted and
// the call uncertain.
func TestRunsLeaveAPairThatAnotherProcessPlaysRunning(t *testing.T) {
	t.Parallel()
	db := t.TempDir() + "/runs.db"
	e := env(t)
	var pairID string
	held := false
	wait := started(t, append(e, "SPICE_ORCH_PAUSE_AFTER=tool.started"), func(cmd *exec.Cmd, line string) {
		if !strings.Contains(line, "holding the pair after event") || held {
			return
		}
		held = true
		for _, ro := range [][]string{nil, {"--read-only"}} {
			list := spiceOrch(t, e, append([]string{"runs", "list", "--store", db}, ro...)...)
			require.Equal(t, 0, list.code, list.stderr)
			pairID = pairIDPattern.FindString(list.stdout)
			require.Regexp(t, `(?m)^`+pairID+`\s+running\s`, list.stdout, "the pair another process plays")
			show := spiceOrch(t, e, append([]string{"runs", "show", pairID, "--store", db}, ro...)...)
			require.Equal(t, 0, show.code, show.stderr)
			require.Contains(t, show.stdout, "status    running")
			require.NotContains(t, show.stdout, "uncertain")
			run := spiceOrch(t, e, append([]string{"runs", "show", pairID + "/writer/run-1", "--store", db}, ro...)...)
			require.Contains(t, run.stdout, "fs.write  mutating  started")
		}
		require.NoError(t, cmd.Process.Kill())
	}, "run", "--json", "--store", db)
	r := wait()
	require.True(t, held, r.stderr)
	require.Equal(t, -1, r.code, "killed")

	show := spiceOrch(t, e, "runs", "show", pairID, "--store", db, "--read-only")
	require.Equal(t, 0, show.code, show.stderr)
	require.Contains(t, show.stdout, "status    interrupted", "read-only shows what recovery will mark")
	require.Regexp(t, `fs.write \(call .*, mutating\), started at run sequence 5, no outcome recorded`, show.stdout)
	list := spiceOrch(t, e, "runs", "list", "--store", db)
	require.Regexp(t, `(?m)^`+pairID+`\s+interrupted\s`, list.stdout)
}
