//go:build linux

package host

import (
	"syscall"
	"time"
)

// execPath executes the child's fd 3, the verified open file.
const execPath = "/proc/self/fd/3"

func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// waitGroupGone waits, bounded, until no process of the group is left. A
// killed process vanishes asynchronously, so this polls.
func waitGroupGone(pgid int, max time.Duration) {
	if pgid <= 0 {
		return
	}
	deadline := time.Now().Add(max)
	for d := 100 * time.Microsecond; time.Now().Before(deadline); d = min(2*d, 20*time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
			return
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		t := time.NewTimer(d)
		<-t.C
	}
}
