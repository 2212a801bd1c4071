package orchestrator

import "context"

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

// stop records s unless the pair was already stopped, and shuts both
// workers' engines down: that cancels the active run (K24) and refuses
// any later one, so the pair starts no further run (O6). A caller's
// cancellation that came first wins; it needs no stop, since every run
// lives under the caller's context.
//
// A stop reaches the engines only while the pair holds its crew: once the
// pair has ended and given the crew back, a Team may have lent it to
// another pair.
func (p *Pair) stop(s stopCode) {
	if p.caller.Err() != nil {
		s = stopCancelled
	}
	p.stopped.CompareAndSwap(uint32(stopNone), uint32(s))
	if !p.held.CompareAndSwap(crewHeld, crewSpent) && p.held.Load() != crewSpent {
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
	s := stopCode(p.stopped.Load())
	if s == stopNone {
		if p.caller.Err() == nil {
			return outcome{}, false
		}
		p.stopped.CompareAndSwap(uint32(stopNone), uint32(stopCancelled))
		s = stopCode(p.stopped.Load())
	}
	switch s {
	case stopTokens:
		return outcome{reason: ReasonBudgetExhausted, limit: LimitTokens}, true
	case stopToolCalls:
		return outcome{reason: ReasonBudgetExhausted, limit: LimitToolCalls}, true
	case stopWallTime:
		return outcome{reason: ReasonBudgetExhausted, limit: LimitWallTime}, true
	}
	return outcome{reason: ReasonCancelled}, true
}
