//go:build linux

package proctree

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A descendant in a session of its own is still found, and Kill ends it.
func TestP7_DescendantsFollowParentsAcrossSessions(t *testing.T) {
	// The inner shell prints its PID once it runs in its new session.
	cmd := exec.Command("/bin/sh", "-c", `setsid /bin/sh -c 'echo $$; exec sleep 300' & wait`)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	leader, ok := Of(cmd.Process.Pid)
	require.True(t, ok)
	var escaped Proc
	for _, d := range Descendants(cmd.Process.Pid) {
		if d.PID == pid {
			escaped = d
		}
	}
	require.Equal(t, pid, escaped.PID, "the descendant in its own session is found")
	require.NotEqual(t, Session(leader), Session(escaped))
	Kill([]Proc{escaped})
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	// SIGKILL is delivered asynchronously to a process that is not our
	// child: look again on a short tick, bounded.
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for Alive(escaped) {
		select {
		case <-deadline.C:
			t.Fatalf("process %d survived", pid)
		case <-tick.C:
		}
	}
}
