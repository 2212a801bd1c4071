package host

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/spice-orch/spice-orch/kernel/plan"
)

// drain stops a retired generation once no lease holds it: it waits at
// most DrainTimeout for its calls in flight, then stops it gracefully, or
// by force with the calls still in flight (they end CodeStopped).
func (s *Source) drain(g *generation) {
	defer s.wg.Done()
	<-g.unleased
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	err := g.p.Idle(ctx)
	cancel()
	ev := Event{Kind: EventDrained, Slot: g.slot, Generation: g.id}
	s.mu.Lock()
	forced, inFlight := g.forced, g.forcedInFlight
	s.mu.Unlock()
	if forced {
		// Close stopped it by force while it drained.
		ev = Event{Kind: EventForced, Slot: g.slot, Generation: g.id, InFlight: inFlight,
			Reason: "stopped by force when the source closed after " + s.cfg.ShutdownTimeout.String()}
		g.p.Kill() // waits for Close's own Kill to finish
	} else if err != nil {
		ev = Event{Kind: EventForced, Slot: g.slot, Generation: g.id, InFlight: g.p.InFlight(),
			Reason: "calls still in flight after " + s.cfg.DrainTimeout.String()}
		g.p.Kill()
	} else {
		_ = g.p.Close()
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
	s.emit([]Event{ev})
}

// forget drops the retained plans that hold g. With s.mu.
func (s *Source) forget(g *generation) {
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

// watch notices a generation's process dying before the source stopped
// it, and restarts the plugin within the restart bound.
func (s *Source) watch(g *generation) {
	defer s.wg.Done()
	select {
	case <-g.p.Exited():
	case <-g.done:
		return
	}
	s.mu.Lock()
	if g.retired || s.closed {
		s.mu.Unlock()
		return
	}
	g.state = "dead"
	sl := s.slots[g.slot]
	evs := []Event{{Kind: EventDead, Slot: g.slot, Generation: g.id, Reason: "the process exited"}}
	restart := sl.active == g && s.allowRestart(sl)
	if sl.active == g && !restart {
		sl.failed = "restarted " + strconv.Itoa(s.cfg.MaxRestarts) + " times within " + s.cfg.RestartWindow.String()
		evs = append(evs, Event{Kind: EventPluginFailed, Slot: g.slot, Generation: g.id, Reason: sl.failed})
	}
	cfg := sl.cfg
	s.mu.Unlock()
	s.emit(evs)
	if restart {
		s.restart(g, cfg)
	}
}

// allowRestart counts a restart within the window. With s.mu.
func (s *Source) allowRestart(sl *slot) bool {
	now := s.cfg.Now()
	kept := sl.restarts[:0]
	for _, t := range sl.restarts {
		if now.Sub(t) < s.cfg.RestartWindow {
			kept = append(kept, t)
		}
	}
	sl.restarts = kept
	if len(sl.restarts) >= s.cfg.MaxRestarts {
		return false
	}
	sl.restarts = append(sl.restarts, now)
	return true
}

// restart launches a fresh generation of dead's slot and activates it.
// A failed launch counts as a restart; the limit ends the attempts.
func (s *Source) restart(dead *generation, cfg Config) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.StartupTimeout+time.Second)
		if cfg.StartupTimeout == 0 {
			ctx, cancel = context.WithTimeout(context.Background(), DefaultStartupTimeout+time.Second)
		}
		g, err := s.launch(ctx, dead.slot, cfg)
		cancel()
		s.mu.Lock()
		sl := s.slots[dead.slot]
		if err == nil {
			if s.closed || sl.active != dead {
				s.mu.Unlock()
				s.discard(g)
				return
			}
			sl.active = g
			evs, aerr := s.activate()
			if aerr != nil {
				sl.active = dead
				s.mu.Unlock()
				s.discard(g)
				s.emit([]Event{{Kind: EventCandidateFailed, Slot: dead.slot, Reason: aerr.Error()}})
				return
			}
			s.mu.Unlock()
			s.emit(append([]Event{{Kind: EventRestarted, Slot: dead.slot, Generation: g.id, Reason: "replaces " + dead.id}}, evs...))
			return
		}
		evs := []Event{{Kind: EventCandidateFailed, Slot: dead.slot, Reason: err.Error()}}
		again := !s.closed && sl.active == dead && s.allowRestart(sl)
		if !again && !s.closed && sl.active == dead {
			sl.failed = "restart limit reached"
			evs = append(evs, Event{Kind: EventPluginFailed, Slot: dead.slot, Generation: dead.id, Reason: sl.failed})
		}
		s.mu.Unlock()
		s.emit(evs)
		if !again {
			return
		}
	}
}

// Reload launches a candidate of slot i from cfg (a new path and pin, or
// the same) and, once it is verified, activates it for future leases:
// runs that hold a lease keep their generation until they release it. A
// candidate that fails leaves the active generation serving and returns
// the reason (a *LaunchError).
func (s *Source) Reload(ctx context.Context, i int, cfg Config) (GenerationInfo, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return GenerationInfo{}, ErrSourceClosed
	}
	if i < 0 || i >= len(s.slots) {
		s.mu.Unlock()
		return GenerationInfo{}, errors.New("plugin source: no plugin slot " + strconv.Itoa(i))
	}
	s.mu.Unlock()
	g, err := s.launch(ctx, i, cfg)
	if err != nil {
		s.emit([]Event{{Kind: EventCandidateFailed, Slot: i, Reason: err.Error()}})
		return GenerationInfo{}, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.discard(g)
		return GenerationInfo{}, ErrSourceClosed
	}
	sl := s.slots[i]
	old, oldCfg := sl.active, sl.cfg
	sl.active, sl.cfg = g, cfg
	evs, err := s.activate()
	if err != nil {
		sl.active, sl.cfg = old, oldCfg
		s.mu.Unlock()
		s.discard(g)
		s.emit([]Event{{Kind: EventCandidateFailed, Slot: i, Reason: err.Error()}})
		return GenerationInfo{}, err
	}
	sl.failed, sl.restarts = "", nil
	info := s.info(g)
	s.mu.Unlock()
	s.emit(evs)
	return info, nil
}

// Current returns the identity of the plan future leases get.
func (s *Source) Current() GenerationPlan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.planInfo(s.current)
}

// GenerationPlan is a plan and the generations it holds.
type GenerationPlan struct {
	Plan        plan.ID
	Generations []GenerationInfo
}

// Plan returns the generations of a retained plan: how a timeline's plan
// ID finds its generations.
func (s *Source) Plan(planID plan.ID) (GenerationPlan, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.plans[planID]
	if !ok {
		return GenerationPlan{}, false
	}
	return s.planInfo(e), true
}

func (s *Source) planInfo(e *planEntry) GenerationPlan {
	gp := GenerationPlan{Plan: e.plan.ID()}
	for _, g := range e.gens {
		gp.Generations = append(gp.Generations, s.info(g))
	}
	return gp
}

// Generations describes every generation launched, oldest first.
func (s *Source) Generations() []GenerationInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]GenerationInfo, len(s.gens))
	for i, g := range s.gens {
		out[i] = s.info(g)
	}
	return out
}

// Failed returns why slot i's plugin is failed, or "".
func (s *Source) Failed(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.slots) {
		return ""
	}
	return s.slots[i].failed
}

func (s *Source) info(g *generation) GenerationInfo {
	return GenerationInfo{ID: g.id, Slot: g.slot, Manifest: g.p.Manifest(), PID: g.p.PID(), Leases: g.leases, State: g.state}
}

// Close refuses new leases, drains every generation within
// ShutdownTimeout (waiting for the leases held), then stops what is left
// by force. No plugin process survives it.
func (s *Source) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	var evs []Event
	var live []*generation
	for _, g := range s.gens {
		if !g.retired {
			evs = append(evs, s.retire(g))
		}
		live = append(live, g)
	}
	s.mu.Unlock()
	s.emit(evs)
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
				g.forced, g.forcedInFlight = true, g.p.InFlight()
			}
			g.markUnleased()
			s.mu.Unlock()
			g.p.Kill()
		}
		break
	}
	s.wg.Wait()
	return nil
}

// discard stops a candidate that never served: it is marked refused, so
// that its watcher does not take its end for a death.
func (s *Source) discard(g *generation) {
	s.mu.Lock()
	g.retired, g.state = true, "refused"
	s.mu.Unlock()
	g.p.Kill()
	close(g.done)
}
