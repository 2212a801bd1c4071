//go:build linux

package proctree

import (
	"errors"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"
)

// Supported: Linux has what Start and the tree's end need.
const Supported = true

// noNamespaces is set once the system refused a new PID namespace; later
// starts then go without one.
var noNamespaces atomic.Bool

// SetNamespaces turns PID namespaces on or off for later starts and
// returns the previous setting; tests use it to exercise the fallback.
func SetNamespaces(on bool) (was bool) { return !noNamespaces.Swap(!on) }

// Start starts cmd as the first process of a new PID namespace when the
// system allows it (with a user namespace mapping the caller's own IDs
// when it is not root), else in a new process group only; either way the
// process's PID is its group's ID. It retries a few times while the
// executable is busy: a file written just before can still be open for
// writing in a process another goroutine forked and has not exec'd yet
// (golang/go#22315).
func Start(cmd *exec.Cmd) error {
	wait := 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ns := !noNamespaces.Load()
		cmd.SysProcAttr = sysProcAttr(ns)
		err := cmd.Start()
		if err == nil {
			return nil
		}
		switch {
		case ns && isNamespaceRefusal(err):
			noNamespaces.Store(true)
		case errors.Is(err, syscall.ETXTBSY) && attempt < 5:
			t := time.NewTimer(wait)
			<-t.C
			wait *= 2
		default:
			return err
		}
		// A Cmd cannot be started twice: make a fresh one like it.
		*cmd = exec.Cmd{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir,
			Stdin: cmd.Stdin, Stdout: cmd.Stdout, Stderr: cmd.Stderr, ExtraFiles: cmd.ExtraFiles}
	}
}

func sysProcAttr(ns bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if !ns {
		return a
	}
	a.Cloneflags = syscall.CLONE_NEWPID
	if uid, gid := os.Getuid(), os.Getgid(); uid != 0 {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	}
	return a
}

func isNamespaceRefusal(err error) bool {
	for _, e := range []error{syscall.EPERM, syscall.EINVAL, syscall.ENOSPC, syscall.EUSERS, syscall.ENOSYS, syscall.EACCES} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// KillGroup sends SIGKILL to the process group pgid.
func KillGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// WaitGone waits, bounded, until no process of the group and none of
// tree is left. A killed process vanishes asynchronously, and no event
// announces the end of a process that is not our child, so this polls.
func WaitGone(pgid int, tree []Proc, max time.Duration) {
	if pgid <= 0 {
		return
	}
	deadline := time.Now().Add(max)
	for d := 100 * time.Microsecond; time.Now().Before(deadline); d = min(2*d, 20*time.Millisecond) {
		err := syscall.Kill(-pgid, 0)
		live := Live(tree)
		if err == syscall.ESRCH && len(live) == 0 {
			return
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		Kill(live)
		t := time.NewTimer(d)
		<-t.C
	}
}
