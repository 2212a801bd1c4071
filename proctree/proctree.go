//go:build linux

package proctree

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// Proc is one process: its PID and its start time in clock ticks since
// boot, which tells it apart from a later process with the same PID.
type Proc struct {
	PID   int
	Start uint64
}

// stat is what one /proc/PID/stat says.
type stat struct {
	ppid, pgrp, sid int
	start           uint64
	state           byte
}

func read(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	// "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice threads
	// itrealvalue starttime ...": comm may hold anything but not the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 || len(f[0]) == 0 {
		return stat{}, false
	}
	var s stat
	s.state = f[0][0]
	s.ppid, _ = strconv.Atoi(string(f[1]))
	s.pgrp, _ = strconv.Atoi(string(f[2]))
	s.sid, _ = strconv.Atoi(string(f[3]))
	s.start, _ = strconv.ParseUint(string(f[19]), 10, 64)
	return s, true
}

// Descendants returns the live descendants of pid, children first.
func Descendants(pid int) []Proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]Proc{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, ok := read(p)
		if !ok || s.state == 'Z' || s.state == 'X' {
			continue
		}
		children[s.ppid] = append(children[s.ppid], Proc{PID: p, Start: s.start})
	}
	var out []Proc
	queue := []int{pid}
	for len(queue) > 0 && len(out) < 1<<16 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.PID)
		}
		queue = queue[1:]
	}
	return out
}

// Alive reports whether p still runs (a zombie has ended).
func Alive(p Proc) bool {
	s, ok := read(p.PID)
	return ok && s.start == p.Start && s.state != 'Z' && s.state != 'X'
}

// Session returns the session ID of p, or 0 when p has ended.
func Session(p Proc) int {
	s, ok := read(p.PID)
	if !ok || s.start != p.Start {
		return 0
	}
	return s.sid
}

// Kill sends SIGKILL to every process of ps that is still the process it
// names.
func Kill(ps []Proc) {
	for _, p := range ps {
		if Alive(p) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
}

// Live returns the processes of ps that still run.
func Live(ps []Proc) []Proc {
	var out []Proc
	for _, p := range ps {
		if Alive(p) {
			out = append(out, p)
		}
	}
	return out
}

// Of returns the process pid is now, if it runs.
func Of(pid int) (Proc, bool) {
	s, ok := read(pid)
	if !ok || s.state == 'Z' || s.state == 'X' {
		return Proc{}, false
	}
	return Proc{PID: pid, Start: s.start}, true
}
