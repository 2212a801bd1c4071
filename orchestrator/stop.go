package orchestrator

// stopCode records why a pair was stopped from outside its pattern. The
// first stop wins; later ones only cancel again.
type stopCode uint32

const (
	stopNone stopCode = iota
	stopCancelled
	stopTokens
	stopToolCalls
	stopWallTime
)

// stop records s unless the pair was already stopped, and cancels the
// pair's context, which cancels the active run (K24 decides the run's end
// from that context). A caller's cancellation that came first wins.
func (p *Pair) stop(s stopCode) {
	if p.ctx.Err() != nil {
		s = stopCancelled
	}
	p.stopped.CompareAndSwap(uint32(stopNone), uint32(s))
	p.cancel()
}

// interrupted reports whether the pair has been stopped, by a stop or by
// the caller's context, and with which outcome.
func (p *Pair) interrupted() (outcome, bool) {
	s := stopCode(p.stopped.Load())
	if s == stopNone {
		if p.ctx.Err() == nil {
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
