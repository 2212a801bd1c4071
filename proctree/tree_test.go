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

// A descendant that left the group and was seen while the leader ran is
// ended by End, after the leader's grace has run out.
func TestP7_TreeEndsADescendantSeenInItsOwnSession(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `setsid /bin/sh -c 'echo $$; exec sleep 300' & wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)

	tr := NewTree(cmd.Process.Pid, exited)
	tr.See()
	var escaped Proc
	for _, d := range tr.Seen() {
		if d.PID == pid {
			escaped = d
		}
	}
	require.Equal(t, pid, escaped.PID, "the descendant in its own session is seen")
	tr.End(time.Millisecond, 5*time.Second)
	<-exited
	require.False(t, Alive(escaped), "process %d survived End", pid)
}
