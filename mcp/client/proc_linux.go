//go:build linux

package client

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// execPath executes the child's fd 3, the verified open file.
const execPath = "/proc/self/fd/3"

// proc is one process, named by PID and start time so that a reused PID
// is never mistaken for it.
type proc struct {
	pid   int
	start string
}

type stat struct {
	ppid   int
	start  string
	zombie bool
}

// readStat reads /proc/pid/stat.
func readStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	// The command may hold spaces and parentheses: fields follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state), f[1] field 4 (ppid), f[19] field 22 (start).
	if len(f) < 20 {
		return stat{}, false
	}
	pp, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return stat{}, false
	}
	return stat{ppid: pp, start: string(f[19]), zombie: string(f[0]) == "Z"}, true
}

// running reports whether p is still the same, not yet dead, process.
func (p proc) running() bool {
	st, ok := readStat(p.pid)
	return ok && !st.zombie && st.start == p.start
}

// descendants returns the live processes whose parent chain reaches root,
// read from /proc. A process that made its own session still names its
// parent until that parent dies.
func descendants(root int) []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	stats := make(map[int]stat, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok {
			stats[pid] = st
		}
	}
	var out []proc
	for pid, st := range stats {
		if st.zombie {
			continue
		}
		for p, n := st.ppid, 0; p > 1 && n < 64; p, n = stats[p].ppid, n+1 {
			if p == root {
				out = append(out, proc{pid: pid, start: st.start})
				break
			}
		}
	}
	return out
}

// killTree kills root's process group, every live descendant of root and
// every process of known that is still the same process (descendants seen
// before root could exit and orphan them), then waits, bounded, until
// they are gone. Descendants are stopped first, so that none forks away
// while the tree is collected. The leader is reaped by its waiter.
func killTree(root int, known []proc, max time.Duration) {
	if root <= 0 {
		return
	}
	_ = syscall.Kill(root, syscall.SIGSTOP)
	seen := make(map[int]proc)
	for _, p := range known {
		if p.running() {
			seen[p.pid] = p
			_ = syscall.Kill(p.pid, syscall.SIGSTOP)
		}
	}
	for range 16 {
		grew := false
		for _, p := range descendants(root) {
			if _, ok := seen[p.pid]; !ok {
				seen[p.pid] = p
				grew = true
				_ = syscall.Kill(p.pid, syscall.SIGSTOP)
			}
		}
		if !grew {
			break
		}
	}
	_ = syscall.Kill(-root, syscall.SIGKILL)
	_ = syscall.Kill(root, syscall.SIGKILL)
	for _, p := range seen {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(max)
	for d := 100 * time.Microsecond; time.Now().Before(deadline); d = min(2*d, 20*time.Millisecond) {
		left := false
		for _, p := range seen {
			if p.running() {
				left = true
			}
		}
		if !left {
			return
		}
		t := time.NewTimer(d)
		<-t.C
	}
}
