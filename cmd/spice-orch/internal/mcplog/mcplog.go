package mcplog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/sidelog"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/mcp/servers"
	"github.com/spice-orch/spice-orch/store"
)

// Name is the store log of pairID's MCP events.
func Name(pairID string) string { return pairID + "/mcp" }

// KindPlanLeased is the MCP log event of a pair whose servers are shared:
// the generations of the servers' plan it was built with.
const KindPlanLeased = "plan.leased"

// maxEvents bounds the MCP events one pair records.
const maxEvents = 256

// Tool is one tool of a generation in an MCP event.
type Tool struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
	Effect string `json:"effect"`
	Replay string `json:"replay"`
	From   string `json:"from"`
	Pinned bool   `json:"pinned"`
}

// Generation is a generation in a plan.activated or plan.leased payload.
type Generation struct {
	Generation string `json:"generation"`
	Slot       int    `json:"slot"`
	Server     string `json:"server"`
	Pinned     bool   `json:"pinned"`
	PID        int    `json:"pid,omitempty"`
	Tools      []Tool `json:"tools"`
}

// Event is the payload of every MCP log event. Pinned is about Server
// (false for an HTTP server), and is always written; a plan.activated
// says it per generation.
type Event struct {
	PlanID      string       `json:"plan_id,omitempty"`
	Generations []Generation `json:"generations,omitempty"`
	Generation  string       `json:"generation,omitempty"`
	Server      string       `json:"server,omitempty"`
	Pinned      bool         `json:"pinned"`
	Slot        int          `json:"slot"`
	InFlight    int          `json:"in_flight,omitempty"`
	Reason      string       `json:"reason,omitempty"`
}

// Payload is e as the log records it.
func Payload(e servers.Event) Event {
	out := Event{PlanID: string(e.Plan), Generation: e.Generation, Server: e.Server, Pinned: e.Pinned,
		Slot: e.Slot, InFlight: e.InFlight, Reason: e.Reason}
	for _, g := range e.Generations {
		mg := Generation{Generation: g.ID, Slot: g.Slot, Server: g.Server, Pinned: g.Pinned, PID: g.PID, Tools: []Tool{}}
		for _, t := range g.Tools {
			mg.Tools = append(mg.Tools, Tool{Name: t.Name, Digest: t.Digest, Effect: t.Effect.String(),
				Replay: t.Replay.String(), From: string(t.From), Pinned: t.Pinned})
		}
		out.Generations = append(out.Generations, mg)
	}
	return out
}

// Recorder collects the MCP servers' events (OnEvent must return
// quickly) and records them in the MCP log at flush points: after
// compose.Build, and after the pair ended and its servers closed.
type Recorder struct {
	now func() time.Time

	mu      sync.Mutex
	pending []eventlog.Record
	dropped int
	log     *eventlog.Log
}

// NewRecorder starts pairID's MCP log, recorded through st (the store,
// or what stands for it). after is the last sequence the log already
// holds: a resumed pair's servers continue it.
func NewRecorder(pairID string, st eventlog.Observer, now func() time.Time, after uint64) (*Recorder, error) {
	l, err := eventlog.New(eventlog.Config{
		Name: Name(pairID), MaxEvents: maxEvents + 1, MaxBytes: 4 << 20, After: after,
		Required: []eventlog.Observer{st},
	})
	if err != nil {
		return nil, err
	}
	return &Recorder{now: now, log: l}, nil
}

// OnEvent is servers.Config.OnEvent: it holds e for the next Flush.
func (r *Recorder) OnEvent(e servers.Event) {
	b, err := json.Marshal(Payload(e))
	var raw eventlog.Raw
	if err == nil {
		raw, err = eventlog.NewRaw(b)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || len(r.pending) >= maxEvents {
		r.dropped++
		return
	}
	r.pending = append(r.pending, eventlog.Record{Kind: string(e.Kind), Time: r.now(), Payload: raw})
}

// Flush records what is held. Events the log refuses are joined in the
// returned error; the pair's own record is not affected.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	pending := r.pending
	r.pending = nil
	r.mu.Unlock()
	var errs []error
	for _, rec := range pending {
		if _, err := r.log.Append(ctx, rec); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close closes the log, and says how many events the bound dropped.
func (r *Recorder) Close(ctx context.Context) error {
	r.mu.Lock()
	dropped := r.dropped
	r.mu.Unlock()
	err := r.log.Close(ctx)
	if dropped > 0 {
		err = errors.Join(err, fmt.Errorf("%d MCP events over the bound of %d were not recorded", dropped, maxEvents))
	}
	return err
}

// Recorded is one event of a recorded MCP log.
type Recorded struct {
	Kind string
	Time time.Time
	Event
}

// Read reads pairID's MCP log from st; none when the pair had no MCP
// servers.
func Read(ctx context.Context, st *store.Store, pairID string) ([]Recorded, error) {
	es, err := sidelog.Read[Event](ctx, st, Name(pairID))
	if err != nil || es == nil {
		return nil, err
	}
	out := make([]Recorded, len(es))
	for i, e := range es {
		out[i] = Recorded{Kind: e.Kind, Time: e.Time, Event: e.Payload}
	}
	return out, nil
}
