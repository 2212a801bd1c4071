package engine

import "sync/atomic"

// ended is a run's end signal. Its channel is made only when somebody
// waits on it before the run has ended: a run played on its caller's
// goroutine has ended by the time anybody asks, and then needs no channel
// of its own, only the shared closed one.
type ended struct {
	gate atomic.Pointer[gate] // nil, then a waiter's gate, then endedGate
}

type gate struct{ c chan struct{} }

// endedGate is the gate of every ended run whose end nobody waited for.
// It is closed once, at initialization, and never written again.
var endedGate = func() *gate {
	g := &gate{c: make(chan struct{})}
	close(g.c)
	return g
}()

// wait returns a channel that is closed once the run has ended.
func (e *ended) wait() <-chan struct{} {
	if g := e.gate.Load(); g != nil {
		return g.c
	}
	g := &gate{c: make(chan struct{})}
	if e.gate.CompareAndSwap(nil, g) {
		return g.c
	}
	return e.gate.Load().c // another waiter's gate, or endedGate
}

// fire ends the run: what the run wrote before fire is visible to every
// caller that then sees it ended.
func (e *ended) fire() {
	if g := e.gate.Swap(endedGate); g != nil && g != endedGate {
		close(g.c)
	}
}

// fired reports whether the run has ended.
func (e *ended) fired() bool { return e.gate.Load() == endedGate }
