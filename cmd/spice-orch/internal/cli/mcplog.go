package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/mcp/servers"
	"github.com/spice-orch/spice-orch/store"
	"github.com/spice-orch/spice-orch/toolgen"
)

// The MCP log of a pair is a log of its own in the store, named
// MCPLogName(pairID), beside the pair timeline. It holds the generation
// events of the pair's MCP servers (plan.activated, candidate.failed,
// generation.draining, generation.drained, generation.forced); a pair of
// serve --mcp has one plan.leased instead: the generations of the shared
// servers its plan was built with. Every
// event says whether the server's code is pinned: a streamable-HTTP
// server's is not. A plan.activated names the plan of the MCP servers
// and each generation's tools; the plan ID of a run.started leads to it
// through the pair's joined plan (its mcp_plans).

// MCPLogName is the store log of pairID's MCP events.
func MCPLogName(pairID string) string { return pairID + "/mcp" }

// maxMCPEvents bounds the MCP events one pair records.
const maxMCPEvents = 256

// mcpTool is one tool of a generation in an MCP event.
type mcpTool struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
	Effect string `json:"effect"`
	Replay string `json:"replay"`
	From   string `json:"from"`
	Pinned bool   `json:"pinned"`
}

// mcpGeneration is a generation in a plan.activated payload.
type mcpGeneration struct {
	Generation string    `json:"generation"`
	Slot       int       `json:"slot"`
	Server     string    `json:"server"`
	Pinned     bool      `json:"pinned"`
	PID        int       `json:"pid,omitempty"`
	Tools      []mcpTool `json:"tools"`
}

// mcpEvent is the payload of every MCP log event. Pinned is about Server
// (false for an HTTP server); a plan.activated says it per generation.
type mcpEvent struct {
	PlanID      string          `json:"plan_id,omitempty"`
	Generations []mcpGeneration `json:"generations,omitempty"`
	Generation  string          `json:"generation,omitempty"`
	Server      string          `json:"server,omitempty"`
	Pinned      bool            `json:"pinned"`
	Slot        int             `json:"slot"`
	InFlight    int             `json:"in_flight,omitempty"`
	Reason      string          `json:"reason,omitempty"`
}

// mcpRecorder collects the MCP servers' events (OnEvent must return
// quickly) and records them at flush points: after Build, and after the
// pair ended and its servers closed.
type mcpRecorder struct {
	now func() time.Time

	mu      sync.Mutex
	pending []eventlog.Record
	dropped int
	log     *eventlog.Log
}

func newMCPRecorder(pairID string, st eventlog.Observer, now func() time.Time, after uint64) (*mcpRecorder, error) {
	l, err := eventlog.New(eventlog.Config{
		Name: MCPLogName(pairID), MaxEvents: maxMCPEvents + 1, MaxBytes: 4 << 20, After: after,
		Required: []eventlog.Observer{st},
	})
	if err != nil {
		return nil, err
	}
	return &mcpRecorder{now: now, log: l}, nil
}

// onEvent is servers.Config.OnEvent.
func (r *mcpRecorder) onEvent(e servers.Event) {
	b, err := json.Marshal(mcpPayload(e))
	var raw eventlog.Raw
	if err == nil {
		raw, err = eventlog.NewRaw(b)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || len(r.pending) >= maxMCPEvents {
		r.dropped++
		return
	}
	r.pending = append(r.pending, eventlog.Record{Kind: string(e.Kind), Time: r.now(), Payload: raw})
}

func mcpPayload(e servers.Event) mcpEvent {
	out := mcpEvent{PlanID: string(e.Plan), Generation: e.Generation, Server: e.Server, Pinned: e.Pinned,
		Slot: e.Slot, InFlight: e.InFlight, Reason: e.Reason}
	for _, g := range e.Generations {
		mg := mcpGeneration{Generation: g.ID, Slot: g.Slot, Server: g.Server, Pinned: g.Pinned, PID: g.PID, Tools: []mcpTool{}}
		for _, t := range g.Tools {
			mg.Tools = append(mg.Tools, mcpTool{Name: t.Name, Digest: t.Digest, Effect: t.Effect.String(),
				Replay: t.Replay.String(), From: string(t.From), Pinned: t.Pinned})
		}
		out.Generations = append(out.Generations, mg)
	}
	return out
}

// flush records what is pending.
func (r *mcpRecorder) flush(ctx context.Context) error {
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

func (r *mcpRecorder) close(ctx context.Context) error {
	r.mu.Lock()
	dropped := r.dropped
	r.mu.Unlock()
	err := r.log.Close(ctx)
	if dropped > 0 {
		err = errors.Join(err, fmt.Errorf("%d MCP events over the bound of %d were not recorded", dropped, maxMCPEvents))
	}
	return err
}

// recordedMCPEvent is one event of a recorded MCP log.
type recordedMCPEvent struct {
	Kind string
	Time time.Time
	mcpEvent
}

// readMCPLog reads pairID's MCP log; none when the pair had no MCP
// servers.
func readMCPLog(ctx context.Context, st *store.Store, pairID string) ([]recordedMCPEvent, error) {
	var buf bytes.Buffer
	err := st.ReplayJSON(ctx, &buf, MCPLogName(pairID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []recordedMCPEvent
	for line := range bytes.Lines(buf.Bytes()) {
		e, err := eventlog.Decode(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			return nil, err
		}
		re := recordedMCPEvent{Kind: e.Kind(), Time: e.Time()}
		if err := json.Unmarshal(e.Payload().AppendJSON(nil), &re.mcpEvent); err != nil {
			return nil, err
		}
		out = append(out, re)
	}
	return out, nil
}

// pinnedWord is how runs show marks a server's code.
func pinnedWord(pinned bool) string {
	if pinned {
		return "pinned"
	}
	return "UNPINNED"
}

// unpinnedTools are the names of the tools that a generation of an
// unpinned server offered, in any plan of the log.
func unpinnedTools(evs []recordedMCPEvent) map[string]string {
	out := map[string]string{}
	for _, e := range evs {
		for _, g := range e.Generations {
			if g.Pinned {
				continue
			}
			for _, t := range g.Tools {
				out[t.Name] = g.Server
			}
		}
	}
	return out
}

// showMCP prints each plan of the pair's MCP servers with its generations
// and tools, every server marked pinned or UNPINNED, then the events.
func showMCP(out io.Writer, evs []recordedMCPEvent) {
	if len(evs) == 0 {
		return
	}
	fmt.Fprintln(out, "\nmcp generations (by plan)")
	for _, e := range evs {
		if e.Kind != string(toolgen.EventActivated) && e.Kind != kindPlanLeased {
			continue
		}
		fmt.Fprintf(out, "  %s\n", render.Field(e.PlanID))
		for _, g := range e.Generations {
			line := fmt.Sprintf("    %s  server %s  %s", render.Field(g.Generation), render.Field(g.Server), pinnedWord(g.Pinned))
			if g.PID > 0 {
				line += fmt.Sprintf("  pid %d", g.PID)
			}
			fmt.Fprintln(out, line)
			for _, t := range g.Tools {
				fmt.Fprintf(out, "      %s  %s  %s %s (%s)  digest %s\n", render.Field(t.Name), pinnedWord(t.Pinned),
					render.Field(t.Effect), render.Field(t.Replay), render.Field(t.From), render.Field(short(t.Digest)))
			}
		}
	}
	fmt.Fprintln(out, "\nmcp events")
	for _, e := range evs {
		what := e.Generation
		if e.Kind == string(toolgen.EventActivated) || e.Kind == kindPlanLeased {
			what = e.PlanID
		} else if e.Server != "" {
			what += " (server " + render.Field(e.Server) + ", " + pinnedWord(e.Pinned) + ")"
		}
		line := fmt.Sprintf("  %s  %-20s %s", e.Time.UTC().Format("15:04:05.000"), render.Field(e.Kind), render.Field(what))
		if e.InFlight > 0 {
			line += fmt.Sprintf(", %d calls in flight", e.InFlight)
		}
		if e.Reason != "" {
			line += ": " + render.Text(e.Reason)
		}
		fmt.Fprintln(out, line)
	}
}
