package host

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/spice-orch/spice-orch/toolgen"
)

// watch notices a generation's process dying before the source stopped
// it, and restarts the plugin within the restart bound.
func (s *Source) watch(g *toolgen.Gen) {
	defer s.wg.Done()
	p := g.Unit().(*Plugin)
	select {
	case <-p.Exited():
	case <-g.Done():
		return
	}
	dead, active := s.set.MarkDead(g)
	if !dead {
		return
	}
	s.mu.Lock()
	sl := s.slots[g.Slot()]
	evs := []Event{{Kind: EventDead, Slot: g.Slot(), Generation: g.ID(), Reason: "the process exited"}}
	restart := active && s.allowRestart(sl)
	if active && !restart {
		sl.failed = "restarted " + strconv.Itoa(s.cfg.MaxRestarts) + " times within " + s.cfg.RestartWindow.String()
		evs = append(evs, Event{Kind: EventPluginFailed, Slot: g.Slot(), Generation: g.ID(), Reason: sl.failed})
	}
	cfg := sl.cfg
	s.mu.Unlock()
	s.set.Emit(evs)
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
func (s *Source) restart(dead *toolgen.Gen, cfg Config) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.StartupTimeout+time.Second)
		if cfg.StartupTimeout == 0 {
			ctx, cancel = context.WithTimeout(context.Background(), DefaultStartupTimeout+time.Second)
		}
		g, err := s.launch(ctx, dead.Slot(), cfg)
		cancel()
		if err == nil {
			evs, aerr := s.set.Replace(dead, g)
			if aerr != nil {
				s.set.Discard(g)
				if !errors.Is(aerr, toolgen.ErrClosed) && !errors.Is(aerr, toolgen.ErrStale) {
					s.set.Emit([]Event{{Kind: EventCandidateFailed, Slot: dead.Slot(), Reason: aerr.Error()}})
				}
				return
			}
			s.set.Emit(append([]Event{{Kind: EventRestarted, Slot: dead.Slot(), Generation: g.ID(), Reason: "replaces " + dead.ID()}}, evs...))
			return
		}
		evs := []Event{{Kind: EventCandidateFailed, Slot: dead.Slot(), Reason: err.Error()}}
		current := !s.set.Closed() && s.set.Active(dead.Slot()) == dead
		s.mu.Lock()
		sl := s.slots[dead.Slot()]
		again := current && s.allowRestart(sl)
		if !again && current {
			sl.failed = "restart limit reached"
			evs = append(evs, Event{Kind: EventPluginFailed, Slot: dead.Slot(), Generation: dead.ID(), Reason: sl.failed})
		}
		s.mu.Unlock()
		s.set.Emit(evs)
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
	if s.set.Closed() {
		return GenerationInfo{}, ErrSourceClosed
	}
	if i < 0 || i >= len(s.slots) {
		return GenerationInfo{}, errors.New("plugin source: no plugin slot " + strconv.Itoa(i))
	}
	g, err := s.launch(ctx, i, cfg)
	if err != nil {
		s.set.Emit([]Event{{Kind: EventCandidateFailed, Slot: i, Reason: err.Error()}})
		return GenerationInfo{}, err
	}
	// Reload replaces whatever is active, a newer restart included: the
	// operator's configuration wins.
	s.mu.Lock()
	evs, err := s.set.Activate(g)
	if err != nil {
		s.mu.Unlock()
		s.set.Discard(g)
		if errors.Is(err, toolgen.ErrClosed) {
			return GenerationInfo{}, ErrSourceClosed
		}
		s.set.Emit([]Event{{Kind: EventCandidateFailed, Slot: i, Reason: err.Error()}})
		return GenerationInfo{}, err
	}
	sl := s.slots[i]
	sl.cfg, sl.failed, sl.restarts = cfg, "", nil
	s.mu.Unlock()
	s.set.Emit(evs)
	return info(s.set.Info(g)), nil
}
