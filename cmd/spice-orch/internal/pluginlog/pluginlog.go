package pluginlog

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/sidelog"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/plugins/host"
	"github.com/spice-orch/spice-orch/store"
)

// Name is the store log of pairID's plugin events.
func Name(pairID string) string { return pairID + "/plugins" }

// maxPluginEvents bounds the plugin events one pair records.
const maxPluginEvents = 256

// Generation is a generation in a plan.activated payload.
type Generation struct {
	Generation string `json:"generation"`
	Slot       int    `json:"slot"`
	Name       string `json:"name"`
	Version    string `json:"version"`
	SHA256     string `json:"sha256"`
	Path       string `json:"path"`
	PID        int    `json:"pid"`
}

// Event is the payload of every plugin log event.
type Event struct {
	PlanID      string       `json:"plan_id,omitempty"`
	Generations []Generation `json:"generations,omitempty"`
	Generation  string       `json:"generation,omitempty"`
	Slot        int          `json:"slot"`
	InFlight    int          `json:"in_flight,omitempty"`
	Reason      string       `json:"reason,omitempty"`
}

// held is a host event waiting for the next flush.
type held struct {
	at   time.Time
	ev   host.Event
	plan *host.GenerationPlan // resolved for plan.activated
}

// Recorder collects the host's events (OnEvent must return quickly,
// and the first one comes before the host is known) and records them in
// the plugin log at flush points: after compose.Build and after the host
// closed.
type Recorder struct {
	now func() time.Time
	*sidelog.Writer[held]

	mu     sync.Mutex
	lookup func(plan.ID) (host.GenerationPlan, bool)
}

// NewRecorder starts pairID's plugin log, recorded through st (the
// store, or what stands for it). after is the last sequence the log
// already holds: a resumed pair's host continues it.
func NewRecorder(pairID string, st eventlog.Observer, now func() time.Time, after uint64) (*Recorder, error) {
	r := &Recorder{now: now}
	w, err := sidelog.NewWriter(sidelog.WriterConfig[held]{
		Name: Name(pairID), What: "plugin", Max: maxPluginEvents, After: after, Store: st,
		Encode: r.encode,
	})
	if err != nil {
		return nil, err
	}
	r.Writer = w
	return r, nil
}

// OnEvent is the host's OnEvent: it holds e for the next Flush.
func (r *Recorder) OnEvent(e host.Event) {
	p := held{at: r.now(), ev: e}
	if e.Kind == host.EventActivated {
		// Resolved now: a later activation could evict the plan.
		p.plan = r.resolve(e.Plan)
	}
	r.Hold(p)
}

// SetLookup gives the recorder the host's plans, once Build returned.
func (r *Recorder) SetLookup(f func(plan.ID) (host.GenerationPlan, bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookup = f
}

// resolve returns the host's plan id, if the lookup is known and has it.
func (r *Recorder) resolve(id plan.ID) *host.GenerationPlan {
	r.mu.Lock()
	lookup := r.lookup
	r.mu.Unlock()
	if lookup == nil {
		return nil
	}
	if gp, ok := lookup(id); ok {
		return &gp
	}
	return nil
}

// encode makes p's record at Flush, resolving an activation's plan that
// was not yet known when the host reported it.
func (r *Recorder) encode(p held) (eventlog.Record, error) {
	if p.ev.Kind == host.EventActivated && p.plan == nil {
		p.plan = r.resolve(p.ev.Plan)
	}
	b, err := json.Marshal(payloadOf(p))
	if err != nil {
		return eventlog.Record{}, err
	}
	raw, err := eventlog.NewRaw(b)
	if err != nil {
		return eventlog.Record{}, err
	}
	return eventlog.Record{Kind: string(p.ev.Kind), Time: p.at, Payload: raw}, nil
}

func payloadOf(p held) Event {
	e := p.ev
	out := Event{PlanID: string(e.Plan), Generation: e.Generation, Slot: e.Slot, InFlight: e.InFlight, Reason: e.Reason}
	if p.plan != nil {
		for _, g := range p.plan.Generations {
			out.Generations = append(out.Generations, Generation{Generation: g.ID, Slot: g.Slot,
				Name: g.Name, Version: g.Version, SHA256: g.Digest, Path: g.Path, PID: g.PID})
		}
	}
	return out
}

// Recorded is one event of a recorded plugin log.
type Recorded struct {
	Kind string
	Time time.Time
	Event
}

// Read reads pairID's plugin log from st; none when the pair had no
// plugins (or was recorded before plugin logs existed).
func Read(ctx context.Context, st *store.Store, pairID string) ([]Recorded, error) {
	return sidelog.Read(ctx, st, Name(pairID), func(kind string, at time.Time, e Event) Recorded {
		return Recorded{Kind: kind, Time: at, Event: e}
	})
}
