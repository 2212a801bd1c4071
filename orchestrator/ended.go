package orchestrator

import "sync/atomic"

// ended is a pair's end signal. Its channel is made only when somebody
// waits on it before the pair has ended: a pair played by Run has ended by
// the time anybody asks, and then needs no channel of its own, only the
// shared closed one. (The engine's runs have the same signal; the kernel
// exports nothing for it.)
type ended struct {
	gate atomic.Pointer[gate] // nil, then a waiter's gate, then endedGate
}

type gate struct{ c chan struct{} }

// endedGate is the gate of every ended pair whose end nobody waited for.
var endedGate = func() *gate {
	g := &gate{c: make(chan struct{})}
	close(g.c)
	return g
}()

// wait returns a channel that is closed once the pair has ended.
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

// fire ends the pair: what it wrote before fire is visible to every caller
// that then sees it ended.
func (e *ended) fire() {
	if g := e.gate.Swap(endedGate); g != nil && g != endedGate {
		close(g.c)
	}
}

// fired reports whether the pair has ended.
func (e *ended) fired() bool { return e.gate.Load() == endedGate }
