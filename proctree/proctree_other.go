//go:build !linux

package proctree

// Proc is one process: its PID and its start time.
type Proc struct {
	PID   int
	Start uint64
}

// Descendants finds nothing without /proc.
func Descendants(int) []Proc { return nil }

// Alive reports false without /proc.
func Alive(Proc) bool { return false }

// Session returns 0 without /proc.
func Session(Proc) int { return 0 }

// Kill does nothing without /proc.
func Kill([]Proc) {}

// Live returns nothing without /proc.
func Live([]Proc) []Proc { return nil }

// Of finds nothing without /proc.
func Of(int) (Proc, bool) { return Proc{}, false }
