//go:build unix

package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/spice-orch/spice-orch/proctree"
)

// groupGone reports an error unless no live process is left in the
// process group that pid led. A killed descendant stays a zombie until
// its new parent reaps it, which in a container may be never; it has
// exited, so on Linux only processes that are not zombies count.
func groupGone(pid int) error {
	if runtime.GOOS != "linux" {
		err := syscall.Kill(-pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return fmt.Errorf("process group %d still has a process (%v)", pid, err)
	}
	live, err := liveMembers(pid)
	if err != nil {
		return err
	}
	if len(live) > 0 {
		return fmt.Errorf("process group %d still has %d live process(es) after its leader exited", pid, len(live))
	}
	return nil
}

// liveMembers lists the processes of group pgid that are not zombies, from
// /proc/PID/stat ("pid (comm) state ppid pgrp ...").
func liveMembers(pgid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var live []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // it exited meanwhile
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 || f[0][0] == 'Z' || f[0][0] == 'X' {
			continue
		}
		if g, err := strconv.Atoi(string(f[2])); err == nil && g == pgid {
			live = append(live, pid)
		}
	}
	return live, nil
}

// awaitGroupGone waits up to bound for the group to empty after SIGKILL,
// which the kernel delivers asynchronously. No event announces the end of
// a process that is not our child, so it looks again on a short tick.
func awaitGroupGone(pid int, bound time.Duration) error {
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		err := groupGone(pid)
		if err == nil {
			return nil
		}
		select {
		case <-deadline.C:
			return err
		case <-tick.C:
		}
	}
}

// awaitTreeGone waits up to bound for the processes of tree to end, and
// says which still run.
func awaitTreeGone(tree []proctree.Proc, bound time.Duration) error {
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		live := proctree.Live(tree)
		if len(live) == 0 {
			return nil
		}
		select {
		case <-deadline.C:
			return fmt.Errorf("%d descendant(s) of the plugin still run, the first (PID %d) in session %d", len(live), live[0].PID, proctree.Session(live[0]))
		case <-tick.C:
		}
	}
}
