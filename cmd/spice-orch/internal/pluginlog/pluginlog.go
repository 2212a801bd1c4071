package pluginlog

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
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/plugins/host"
	"github.com/spice-orch/spice-orch/store"
)

// The plugin log of a pair is a log of its own in the store, named
// PluginLogName(pairID), beside the pair timeline (whose kinds and bytes
// it leaves as they are). It holds the plugin host's generation and lease
// events under the host's kinds (plan.activated, generation.draining,
// generation.drained, generation.forced, generation.dead,
// generation.restarted, candidate.failed, plugin.failed). A plan.activated
// names every generation of the plan it activated: the plan ID of a
// run.started in the timeline leads, through it, to the plugin processes
// (name, version, digest, PID) that served that run.

// PluginLogName is the store log of pairID's plugin events.
func PluginLogName(pairID string) string { return pairID + "/plugins" }

// maxPluginEvents bounds the plugin events one pair records.
const maxPluginEvents = 256

// pluginGeneration is a generation in a plan.activated payload.
type pluginGeneration struct {
	Generation string `json:"generation"`
	Slot       int    `json:"slot"`
	Name       string `json:"name"`
	Version    string `json:"version"`
	SHA256     string `json:"sha256"`
	Path       string `json:"path"`
	PID        int    `json:"pid"`
}

// PluginEvent is the payload of every plugin log event.
type PluginEvent struct {
	PlanID      string             `json:"plan_id,omitempty"`
	Generations []pluginGeneration `json:"generations,omitempty"`
	Generation  string             `json:"generation,omitempty"`
	Slot        int                `json:"slot"`
	InFlight    int                `json:"in_flight,omitempty"`
	Reason      string             `json:"reason,omitempty"`
}

type pendingPluginEvent struct {
	at   time.Time
	ev   host.Event
	plan *host.GenerationPlan // resolved for plan.activated
}

// PluginRecorder collects the host's events (OnEvent must return quickly,
// and the first one comes before the host is known) and records them in
// the plugin log at flush points: after Build and after the host closed.
type PluginRecorder struct {
	now func() time.Time

	mu      sync.Mutex
	lookup  func(plan.ID) (host.GenerationPlan, bool)
	pending []pendingPluginEvent
	dropped int
	log     *eventlog.Log
}

// after is the last sequence the log already holds: a resumed pair's
// host continues it.
func NewPluginRecorder(pairID string, st eventlog.Observer, now func() time.Time, after uint64) (*PluginRecorder, error) {
	l, err := eventlog.New(eventlog.Config{
		Name: PluginLogName(pairID), MaxEvents: maxPluginEvents + 1, MaxBytes: 4 << 20, After: after,
		Required: []eventlog.Observer{st},
	})
	if err != nil {
		return nil, err
	}
	return &PluginRecorder{now: now, log: l}, nil
}

// onEvent is the host's OnEvent.
func (r *PluginRecorder) OnEvent(e host.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) >= maxPluginEvents {
		r.dropped++
		return
	}
	p := pendingPluginEvent{at: r.now(), ev: e}
	if e.Kind == host.EventActivated && r.lookup != nil {
		// Resolved now: a later activation could evict the plan.
		if gp, ok := r.lookup(e.Plan); ok {
			p.plan = &gp
		}
	}
	r.pending = append(r.pending, p)
}

// SetLookup gives the recorder the host's plans, once Build returned.
func (r *PluginRecorder) SetLookup(f func(plan.ID) (host.GenerationPlan, bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookup = f
}

// flush records what is pending. Events the log refuses are counted in the
// returned error; the pair's own record is not affected.
func (r *PluginRecorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	pending, lookup := r.pending, r.lookup
	r.pending = nil
	r.mu.Unlock()
	var errs []error
	for _, p := range pending {
		if p.ev.Kind == host.EventActivated && p.plan == nil && lookup != nil {
			if gp, ok := lookup(p.ev.Plan); ok {
				p.plan = &gp
			}
		}
		b, err := json.Marshal(payloadOf(p))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		raw, err := eventlog.NewRaw(b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := r.log.Append(ctx, eventlog.Record{Kind: string(p.ev.Kind), Time: p.at, Payload: raw}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (r *PluginRecorder) Close(ctx context.Context) error {
	r.mu.Lock()
	dropped := r.dropped
	r.mu.Unlock()
	err := r.log.Close(ctx)
	if dropped > 0 {
		err = errors.Join(err, fmt.Errorf("%d plugin events over the bound of %d were not recorded", dropped, maxPluginEvents))
	}
	return err
}

func payloadOf(p pendingPluginEvent) PluginEvent {
	e := p.ev
	out := PluginEvent{PlanID: string(e.Plan), Generation: e.Generation, Slot: e.Slot, InFlight: e.InFlight, Reason: e.Reason}
	if p.plan != nil {
		for _, g := range p.plan.Generations {
			out.Generations = append(out.Generations, pluginGeneration{Generation: g.ID, Slot: g.Slot,
				Name: g.Name, Version: g.Version, SHA256: g.Digest, Path: g.Path, PID: g.PID})
		}
	}
	return out
}

// recordedPluginEvent is one event of a recorded plugin log.
type recordedPluginEvent struct {
	Kind string
	Time time.Time
	PluginEvent
}

// ReadPluginLog reads pairID's plugin log; none when the pair had no
// plugins (or was recorded before plugin logs existed).
func ReadPluginLog(ctx context.Context, st *store.Store, pairID string) ([]recordedPluginEvent, error) {
	var buf bytes.Buffer
	err := st.ReplayJSON(ctx, &buf, PluginLogName(pairID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []recordedPluginEvent
	for line := range bytes.Lines(buf.Bytes()) {
		e, err := eventlog.Decode(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			return nil, err
		}
		re := recordedPluginEvent{Kind: e.Kind(), Time: e.Time()}
		if err := json.Unmarshal(e.Payload().AppendJSON(nil), &re.PluginEvent); err != nil {
			return nil, err
		}
		out = append(out, re)
	}
	return out, nil
}

// ShowPlugins prints, for a pair whose plans came from plugins, each plan's
// generations and the runs that leased it, then the generation events.
func ShowPlugins(out io.Writer, evs []recordedPluginEvent, runs []store.RunSummary) {
	if len(evs) == 0 {
		return
	}
	byPlan := map[string][]string{}
	for _, r := range runs {
		byPlan[r.PlanID] = append(byPlan[r.PlanID], r.ID)
	}
	fmt.Fprintln(out, "\nplugin generations (by plan)")
	for _, e := range evs {
		if e.Kind != string(host.EventActivated) {
			continue
		}
		used := "no run"
		if rs := byPlan[e.PlanID]; len(rs) > 0 {
			used = fmt.Sprintf("%d runs", len(rs))
			if len(rs) == 1 {
				used = "1 run"
			}
		}
		fmt.Fprintf(out, "  %s (%s)\n", render.Field(e.PlanID), used)
		for _, g := range e.Generations {
			fmt.Fprintf(out, "    %s  %s %s  sha256 %s  pid %d\n", render.Field(g.Generation), render.Field(g.Name),
				render.Field(g.Version), render.Field(short(g.SHA256)), g.PID)
		}
	}
	fmt.Fprintln(out, "\nplugin events")
	for _, e := range evs {
		what := e.Generation
		if e.Kind == string(host.EventActivated) {
			what = e.PlanID
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

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
