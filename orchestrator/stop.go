package orchestrator

import (
	"context"
	"sync/atomic"
	"time"
)

// stopCode records why a pair was stopped from outside its pattern. The
// first stop wins; later ones only shut the engines down again.
type stopCode uint32

const (
	stopNone stopCode = iota
	stopCancelled
	stopTokens
	stopToolCalls
	stopWallTime
)

// crewState is a pair's hold on its crew.
type crewState = uint32

const (
	crewHeld     crewState = iota // the pair may run the crew's workers
	crewSpent                     // a stop shut the engines down: never reused
	crewReturned                  // the pair has ended and given the crew back
)

// stopState is what stops a pair from outside its pattern.
type stopState struct {
	code atomic.Uint32 // a stopCode, set once
	held atomic.Uint32 // a crewState
	wall *time.Timer   // the wall-time budget; nil without one
}

// halt records s unless the pair was already stopped, and shuts both
// workers' engines down: that cancels the active run (K24) and refuses
// any later one, so the pair starts no further run (O6). A caller's
// cancellation that came first wins; it needs no stop, since every run
// lives under the caller's context.
//
// A stop reaches the engines only while the pair holds its crew: once the
// pair has ended and given the crew back, a Team may have lent it to
// another pair.
func (p *Pair) halt(s stopCode) {
	if p.ctx.Err() != nil {
		s = stopCancelled
	}
	p.stop.code.CompareAndSwap(uint32(stopNone), uint32(s))
	if s == stopCancelled {
		p.fin.cancel()
	}
	if !p.stop.held.CompareAndSwap(crewHeld, crewSpent) && p.stop.held.Load() != crewSpent {
		return
	}
	for _, w := range p.crew.workers {
		// With an expired context Shutdown cancels and returns at once,
		// so a stop never waits, even on the run's own goroutine (the
		// budget decorator stops the pair from inside a model operation).
		_ = w.Shutdown(expired)
	}
}

// expired is a context that has ended.
var expired = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// interrupted reports whether the pair has been stopped, by a stop or by
// the caller's context, and with which outcome.
func (p *Pair) interrupted() (outcome, bool) {
	if p.ctx.Err() != nil {
		p.stop.code.CompareAndSwap(uint32(stopNone), uint32(stopCancelled))
	}
	return stopOutcome(stopCode(p.stop.code.Load()))
}

// stopOutcome is the outcome of a pair stopped with s.
func stopOutcome(s stopCode) (outcome, bool) {
	switch s {
	case stopNone:
		return outcome{}, false
	case stopTokens:
		return outcome{reason: ReasonBudgetExhausted, limit: LimitTokens}, true
	case stopToolCalls:
		return outcome{reason: ReasonBudgetExhausted, limit: LimitToolCalls}, true
	case stopWallTime:
		return outcome{reason: ReasonBudgetExhausted, limit: LimitWallTime}, true
	}
	return outcome{reason: ReasonCancelled}, true
}
