package proctree

import (
	"slices"
	"sync"
	"time"
)

// A Tree is a started process group and the descendants seen of its
// leader. A descendant seen while the leader runs can still be ended after
// the leader has exited, when it has left the group (setsid) and been
// re-parented where Descendants no longer finds it.
type Tree struct {
	pgid   int
	exited <-chan struct{}
	mu     sync.Mutex
	seen   []Proc
}

// NewTree follows the group pgid, whose leader closes exited once it has
// been reaped.
func NewTree(pgid int, exited <-chan struct{}) *Tree {
	return &Tree{pgid: pgid, exited: exited}
}

// See records the leader's current descendants. Once the leader has
// exited it adds nothing: its descendants are then found elsewhere.
func (t *Tree) See() {
	if t.pgid <= 0 || t.done() {
		return
	}
	ds := Descendants(t.pgid)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range ds {
		if !slices.Contains(t.seen, d) {
			t.seen = append(t.seen, d)
		}
	}
}

// Seen returns the descendants seen so far.
func (t *Tree) Seen() []Proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.seen)
}

// End gives the leader up to grace to exit on its own (none when grace is
// 0), then kills the group and every descendant seen, waits for the
// leader to be reaped and, up to max, for the rest to vanish.
func (t *Tree) End(grace, max time.Duration) {
	if grace > 0 {
		timer := time.NewTimer(grace)
		select {
		case <-t.exited:
		case <-timer.C:
		}
		timer.Stop()
	}
	t.See()
	KillGroup(t.pgid)
	seen := t.Seen()
	Kill(seen)
	<-t.exited
	WaitGone(t.pgid, seen, max)
}

func (t *Tree) done() bool {
	select {
	case <-t.exited:
		return true
	default:
		return false
	}
}
