package telemetry

import (
	"container/list"
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// ScopeName is the instrumentation scope of every span and instrument.
const ScopeName = "github.com/spice-orch/spice-orch/telemetry"

// Defaults and limits of Config.
const (
	DefaultMaxPairs = 1024
	MaxPairs        = 1 << 20
	// Mailbox is the best-effort mailbox a timeline should give the
	// Observer (orchestrator.TimelineConfig.Mailbox): room for a long
	// pair's burst of events, so the observer draws all of it while it
	// keeps up, and drops (and counts) only when it cannot.
	Mailbox = 256
)

// Config configures Telemetry. New copies it.
type Config struct {
	// TracerProvider draws the traces; nil draws none. For the same trace
	// on every replay, build it with IDGenerator (Setup does).
	TracerProvider trace.TracerProvider
	// MeterProvider records the metrics; nil records none.
	MeterProvider metric.MeterProvider
	// Providers gives each worker role its gen_ai.provider.name ("openai",
	// "spice_orch.scripted", ...) when its provider does not say it
	// itself (Instrument): a replay, or a provider without a
	// ProviderName method. A role named by neither gets ProviderUnknown.
	Providers map[string]string
	// RecordContent adds tool results (gen_ai.tool.call.result), each
	// run's final answer (spice_orch.run.final_text) and the messages of
	// problems (a model server's error text, which can quote the prompt)
	// to the spans; without it a failed span's status says only its
	// error.type. Off by default: they are what a person may not want
	// sent to a backend. Tool call arguments are not in the timeline, so
	// never recorded.
	RecordContent bool
	// MaxPairs bounds the pairs drawn at once, and the pairs waiting for
	// their pair.started after Continue. When a new pair would exceed it,
	// the oldest open pair is ended as lost. 0 means DefaultMaxPairs.
	MaxPairs int
}

// ProviderUnknown is the gen_ai.provider.name of a worker whose provider
// neither says its name nor is named by Config.Providers: the attribute is
// required on every span and metric that has it.
const ProviderUnknown = "spice_orch.unknown"

// Telemetry draws pair timelines as traces and metrics. It is an
// eventlog.Observer for pair timelines: add it to a pair's
// orchestrator.TimelineConfig.BestEffort (with Mailbox), never to
// Required, so it can never block or fail a run (K17, D3). One Telemetry
// serves any number of pairs at once; its methods are safe for concurrent
// use.
type Telemetry struct {
	tracer    trace.Tracer // nil without a TracerProvider
	inst      *instruments // nil without a MeterProvider
	providers map[string]string
	content   bool
	maxPairs  int

	mu      sync.Mutex
	pairs   map[string]*pairTrace // open pairs by timeline name
	order   list.List             // of *pairTrace, oldest first
	parents map[string]*list.Element
	waiting list.List // of parent, oldest first

	workers     map[string]*worker // by pair ID and role, until the pair starts (Instrument)
	workerOrder []string

	lost     atomic.Uint64 // events that could not be drawn (Stats)
	failures atomic.Uint64
	evicted  atomic.Uint64
	replays  atomic.Uint64 // numbers replays, so two of one pair never share a drawing
}

// parent is a span context a pair will continue (Continue).
type parent struct {
	pairID string
	sc     trace.SpanContext
}

// New validates cfg and returns a Telemetry.
func New(cfg Config) (*Telemetry, error) {
	switch {
	case cfg.MaxPairs < 0:
		return nil, bound.Malformedf("telemetry.max_pairs", "must not be negative")
	case cfg.MaxPairs == 0:
		cfg.MaxPairs = DefaultMaxPairs
	case cfg.MaxPairs > MaxPairs:
		return nil, bound.Count("telemetry.max_pairs", cfg.MaxPairs, MaxPairs)
	}
	for role, name := range cfg.Providers {
		if err := bound.Name("telemetry.providers[]", role); err != nil {
			return nil, err
		}
		if err := bound.Name("telemetry.providers["+role+"]", name); err != nil {
			return nil, err
		}
	}
	t := &Telemetry{
		providers: maps.Clone(cfg.Providers),
		content:   cfg.RecordContent,
		maxPairs:  cfg.MaxPairs,
		pairs:     make(map[string]*pairTrace),
		parents:   make(map[string]*list.Element),
		workers:   make(map[string]*worker),
	}
	if cfg.TracerProvider != nil {
		t.tracer = cfg.TracerProvider.Tracer(ScopeName)
	}
	if cfg.MeterProvider != nil {
		inst, err := newInstruments(cfg.MeterProvider.Meter(ScopeName))
		if err != nil {
			return nil, err
		}
		t.inst = inst
	}
	return t, nil
}

// errPanic is what Observe returns for a contained panic; the timeline
// only counts it.
var errPanic = errors.New("telemetry: panic contained")

// Observe draws one pair timeline event. It is called by the timeline's
// best-effort mailbox, on a goroutine of its own; events of one timeline
// arrive in order, and a gap in their sequence (the mailbox was full) is
// counted and drawn as lost events on the pair span. It never blocks on
// anything but its own short lock and never returns an error for an event
// it could not draw: what it cannot draw, it counts (Stats).
func (t *Telemetry) Observe(_ context.Context, e eventlog.Event) (err error) {
	defer func() {
		if recover() != nil {
			t.failures.Add(1)
			err = errPanic
		}
	}()
	st, ok := liveStep(e)
	if !ok {
		t.lost.Add(1)
		return nil
	}
	t.draw(e.Log(), st, true)
	return nil
}

// Continue makes the pair with this ID a child of the span in ctx (a
// remote parent read from a traceparent header with Extract, say), once
// its pair.started arrives. Call it before the pair starts. Without a
// valid span context in ctx it does nothing. At most Config.MaxPairs pairs
// wait; the oldest is forgotten first.
//
// It applies to the next pair.started of that pair ID, live or replayed:
// a pair that continued a caller's trace replays into that trace when the
// host calls Continue with the same parent before ReplayJSON.
func (t *Telemetry) Continue(ctx context.Context, pairID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || pairID == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.parents[pairID]; ok {
		t.waiting.Remove(el)
	}
	t.parents[pairID] = t.waiting.PushBack(parent{pairID: pairID, sc: sc})
	for t.waiting.Len() > t.maxPairs {
		old := t.waiting.Remove(t.waiting.Front()).(parent)
		delete(t.parents, old.pairID)
	}
}

// takeParent returns and forgets the parent a pair continues; t.mu held.
func (t *Telemetry) takeParent(pairID string) trace.SpanContext {
	el, ok := t.parents[pairID]
	if !ok {
		return trace.SpanContext{}
	}
	delete(t.parents, pairID)
	return t.waiting.Remove(el).(parent).sc
}

// Stats counts what the observer could not do.
type Stats struct {
	// Open is the pairs being drawn now.
	Open int
	// Lost counts events that arrived for no open pair, or that a gap in a
	// timeline's sequence says never arrived.
	Lost uint64
	// Evicted counts open pairs ended as lost to stay within MaxPairs.
	Evicted uint64
	// Failures counts contained panics.
	Failures uint64
}

// Stats returns the current counts.
func (t *Telemetry) Stats() Stats {
	t.mu.Lock()
	open := len(t.pairs)
	t.mu.Unlock()
	return Stats{Open: open, Lost: t.lost.Load(), Evicted: t.evicted.Load(), Failures: t.failures.Load()}
}

// lookup returns the open pair of timeline key, opening one for a
// pair.started, or for the pair.resumed a resumed timeline starts with
// (with the parent Continue registered); nil when the event belongs to
// no open pair.
func (t *Telemetry) lookup(key string, st *step) *pairTrace {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pt, ok := t.pairs[key]; ok {
		if st.start == nil {
			return pt
		}
		// A second pair.started under one name: the first pair is over.
		t.removeLocked(pt)
		pt.abandonLocked(t, st.at, reasonLost)
	}
	if st.start == nil && st.resume == nil {
		return nil
	}
	for len(t.pairs) >= t.maxPairs {
		old := t.order.Front().Value.(*pairTrace)
		t.removeLocked(old)
		t.evicted.Add(1)
		old.abandonLocked(t, old.lastAt, reasonLost)
	}
	var pt *pairTrace
	if s := st.start; s != nil {
		pt = &pairTrace{key: key, parent: t.takeParent(s.pairID), workers: t.takeWorkersLocked(s.pairID, s.first, s.second)}
	} else {
		pt = &pairTrace{key: key, parent: t.takeParent(st.resume.pairID), workers: t.takeAllWorkersLocked(st.resume.pairID)}
	}
	pt.el = t.order.PushBack(pt)
	t.pairs[key] = pt
	return pt
}

// removeLocked forgets an open pair; t.mu held.
func (t *Telemetry) removeLocked(pt *pairTrace) {
	if t.pairs[pt.key] == pt {
		delete(t.pairs, pt.key)
		t.order.Remove(pt.el)
	}
}

// draw applies one step to the pair of timeline key. live records
// metrics too; a replay draws spans only.
func (t *Telemetry) draw(key string, st step, live bool) {
	pt := t.lookup(key, &st)
	if pt == nil {
		t.lost.Add(1)
		return
	}
	if pt.applyLocked(t, &st, live) {
		t.mu.Lock()
		t.removeLocked(pt)
		t.mu.Unlock()
	}
}

// finish ends the pair of timeline key as interrupted at its last event,
// if it is still open: a replayed timeline without a terminal.
func (t *Telemetry) finish(key string) {
	t.mu.Lock()
	pt, ok := t.pairs[key]
	if ok {
		t.removeLocked(pt)
	}
	t.mu.Unlock()
	if ok {
		pt.abandonLocked(t, pt.lastAt, reasonInterrupted)
	}
}

// providerOf returns the gen_ai.provider.name of a role's worker: what
// its provider says (Instrument), else Config.Providers, else
// ProviderUnknown.
func (t *Telemetry) providerOf(w *worker, role string) string {
	if w != nil && w.provider != "" {
		return w.provider
	}
	if name := t.providers[role]; name != "" {
		return name
	}
	return ProviderUnknown
}

var _ eventlog.Observer = (*Telemetry)(nil)

// zeroTime guards span times: a zero time would make the SDK use the
// wall clock, and a replay would then differ.
func zeroTime(at time.Time) time.Time {
	if at.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return at
}
