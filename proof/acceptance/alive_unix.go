//go:build unix

package acceptance

import (
	"errors"
	"syscall"
)

// alive reports whether process pid exists (a zombie counts: it was not
// reaped).
func alive(pid int) bool {
	return pid > 0 && !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
