//go:build unix

package conformance

import (
	"errors"
	"fmt"
	"syscall"
)

// groupGone reports an error unless no process is left in the process
// group that pid led.
func groupGone(pid int) error {
	err := syscall.Kill(-pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	if err == nil {
		return fmt.Errorf("process group %d still has a process after its leader exited", pid)
	}
	return fmt.Errorf("process group %d: %w", pid, err)
}
