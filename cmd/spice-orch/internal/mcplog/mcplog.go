package mcplog

import (
	"context"
	"encoding/json"
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
	*sidelog.Writer[eventlog.Record]
}

// NewRecorder starts pairID's MCP log, recorded through st (the store,
// or what stands for it). after is the last sequence the log already
// holds: a resumed pair's servers continue it.
func NewRecorder(pairID string, st eventlog.Observer, now func() time.Time, after uint64) (*Recorder, error) {
	w, err := sidelog.NewWriter(sidelog.WriterConfig[eventlog.Record]{
		Name: Name(pairID), What: "MCP", Max: maxEvents, After: after, Store: st,
		Encode: func(rec eventlog.Record) (eventlog.Record, error) { return rec, nil },
	})
	if err != nil {
		return nil, err
	}
	return &Recorder{now: now, Writer: w}, nil
}

// OnEvent is servers.Config.OnEvent: it holds e for the next Flush,
// encoded now, since the servers may reuse what e refers to.
func (r *Recorder) OnEvent(e servers.Event) {
	b, err := json.Marshal(Payload(e))
	var raw eventlog.Raw
	if err == nil {
		raw, err = eventlog.NewRaw(b)
	}
	if err != nil {
		r.Drop()
		return
	}
	r.Hold(eventlog.Record{Kind: string(e.Kind), Time: r.now(), Payload: raw})
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
	return sidelog.Read(ctx, st, Name(pairID), func(kind string, at time.Time, e Event) Recorded {
		return Recorded{Kind: kind, Time: at, Event: e}
	})
}
