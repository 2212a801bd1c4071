package toolgen

import (
	"context"
	"time"

	"github.com/spice-orch/spice-orch/kernel/plan"
)

// drain stops a retired generation once no lease holds it: it waits at
// most DrainTimeout for its calls in flight, then stops it gracefully, or
// by force with the calls still in flight.
func (s *Set) drain(g *Gen) {
	defer s.wg.Done()
	<-g.unleased
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	err := g.unit.Idle(ctx)
	cancel()
	ev := Event{Kind: EventDrained, Slot: g.slot, Generation: g.id}
	s.mu.Lock()
	forced, inFlight := g.forced, g.forcedInFlight
	s.mu.Unlock()
	if forced {
		// Close stopped it by force while it drained.
		ev = Event{Kind: EventForced, Slot: g.slot, Generation: g.id, InFlight: inFlight,
			Reason: "stopped by force when the source closed after " + s.cfg.ShutdownTimeout.String()}
		g.unit.Kill() // waits for Close's own Kill to finish
	} else if err != nil {
		ev = Event{Kind: EventForced, Slot: g.slot, Generation: g.id, InFlight: g.unit.InFlight(),
			Reason: "calls still in flight after " + s.cfg.DrainTimeout.String()}
		g.unit.Kill()
	} else {
		_ = g.unit.Close()
	}
	s.mu.Lock()
	if g.state == "draining" {
		g.state = "drained"
		if ev.Kind == EventForced {
			g.state = "forced"
		}
	}
	s.forget(g)
	s.mu.Unlock()
	close(g.done)
	s.Emit([]Event{ev})
}

// forget drops the retained plans that hold g. With s.mu.
func (s *Set) forget(g *Gen) {
	kept := s.order[:0]
	for _, e := range s.order {
		if e != s.current && contains(e.gens, g) && e.leases == 0 {
			delete(s.plans, e.plan.ID())
			continue
		}
		kept = append(kept, e)
	}
	s.order = kept
}

// MarkDead records that g's unit ended by itself. It reports false, and
// records nothing, when g was retired or the set closed (an end the set
// caused), and whether g is still its slot's active generation.
func (s *Set) MarkDead(g *Gen) (dead, active bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g.retired || s.closed {
		return false, false
	}
	g.state = "dead"
	return true, s.active[g.slot] == g
}

// Active returns the active generation of slot, or nil.
func (s *Set) Active(slot int) *Gen {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slot < 0 || slot >= len(s.active) {
		return nil
	}
	return s.active[slot]
}

// Closed reports whether Close (or Abort) was called.
func (s *Set) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Current describes the plan future leases get.
func (s *Set) Current() PlanInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == nil {
		return PlanInfo{}
	}
	return s.planInfo(s.current)
}

// Plan describes a retained plan: how a timeline's plan ID finds its
// generations.
func (s *Set) Plan(planID plan.ID) (PlanInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.plans[planID]
	if !ok {
		return PlanInfo{}, false
	}
	return s.planInfo(e), true
}

func (s *Set) planInfo(e *planEntry) PlanInfo {
	pi := PlanInfo{Plan: e.plan.ID()}
	for _, g := range e.gens {
		pi.Generations = append(pi.Generations, info(g))
	}
	return pi
}

// Generations describes every generation added, oldest first.
func (s *Set) Generations() []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Info, len(s.gens))
	for i, g := range s.gens {
		out[i] = info(g)
	}
	return out
}

// Info describes g.
func (s *Set) Info(g *Gen) Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return info(g)
}

func info(g *Gen) Info {
	return Info{ID: g.id, Slot: g.slot, Unit: g.unit, Leases: g.leases, State: g.state}
}

// Close refuses new leases, drains every generation within
// ShutdownTimeout (waiting for the leases held), then stops what is left
// by force. Every unit is stopped when it returns.
func (s *Set) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	var evs []Event
	var live []*Gen
	for _, g := range s.gens {
		if !g.retired {
			evs = append(evs, s.retire(g))
		}
		live = append(live, g)
	}
	s.mu.Unlock()
	s.Emit(evs)
	t := time.NewTimer(s.cfg.ShutdownTimeout)
	defer t.Stop()
	for _, g := range live {
		select {
		case <-g.done:
			continue
		case <-t.C:
		}
		// Out of time: stop every generation left by force, leased or not.
		for _, g := range live {
			s.mu.Lock()
			if g.state == "draining" {
				g.state = "forced"
				g.forced, g.forcedInFlight = true, g.unit.InFlight()
			}
			g.markUnleased()
			s.mu.Unlock()
			g.unit.Kill()
		}
		break
	}
	s.wg.Wait()
	return nil
}

// Abort stops by force every generation added, without drains or
// events: how a constructor that failed part way leaves nothing running.
func (s *Set) Abort() {
	s.mu.Lock()
	s.closed = true
	gens := append([]*Gen(nil), s.gens...)
	s.mu.Unlock()
	for _, g := range gens {
		g.unit.Kill()
		s.mu.Lock()
		g.retired = true
		g.markUnleased()
		s.mu.Unlock()
		closeOnce(g.done)
	}
	s.wg.Wait()
}

// Discard stops a candidate that never served: it is marked refused.
func (s *Set) Discard(g *Gen) {
	s.mu.Lock()
	g.retired, g.state = true, "refused"
	s.mu.Unlock()
	g.unit.Kill()
	closeOnce(g.done)
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}
