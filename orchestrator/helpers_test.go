package orchestrator_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/workers"
)

const task = "Write one line about the sea."

// harness is a pair with deterministic parts: scripted providers that
// record their requests, a plan source that logs its leases, a shared ID
// source and clock, and a required timeline recorder.
type harness struct {
	memory   *plan.Memory
	source   *loggingSource
	first    *enginetest.Provider
	second   *enginetest.Provider
	timeline *enginetest.Recorder
	cfg      orchestrator.Config
}

type script = [][]model.Item

func newHarness(t testing.TB, pattern orchestrator.Pattern, first, second script, tools ...tool.Tool) *harness {
	t.Helper()
	memory, err := enginetest.Plan("plan-1", tools...)
	require.NoError(t, err)
	h := &harness{
		memory:   memory,
		source:   &loggingSource{inner: memory},
		first:    enginetest.NewProvider(first...),
		second:   enginetest.NewProvider(second...),
		timeline: &enginetest.Recorder{},
	}
	h.first.Record, h.second.Record = true, true
	ids, clock := &id.Counter{}, &enginetest.Clock{}
	h.cfg = orchestrator.Config{
		ID:    "pair-1",
		Plans: h.source,
		First: workers.Config{Role: "writer", Definition: definition(t, "writer", "Write."),
			Engine: engine.Config{Provider: h.first, IDs: ids, Clock: clock}},
		Second: workers.Config{Role: "reviewer", Definition: definition(t, "reviewer", "Review."),
			Engine: engine.Config{Provider: h.second, IDs: ids, Clock: clock}},
		Pattern:  pattern,
		Task:     task,
		Timeline: orchestrator.TimelineConfig{Required: []eventlog.Observer{h.timeline}},
	}
	return h
}

func definition(t testing.TB, name, system string) engine.Definition {
	t.Helper()
	d, err := engine.NewDefinition(engine.DefinitionConfig{Name: name, Model: "scripted-1", System: system, MaxTurns: 4})
	require.NoError(t, err)
	return d
}

// run runs the pair on the test goroutine and waits for it.
func (h *harness) run(t testing.TB) (*orchestrator.Pair, orchestrator.Result, error) {
	t.Helper()
	p, err := orchestrator.Run(context.Background(), h.cfg)
	require.NoError(t, err)
	res, err := p.Wait(context.Background())
	return p, res, err
}

// timeline reads a finished pair's whole timeline through a subscription.
func timeline(t testing.TB, p *orchestrator.Pair) []eventlog.Event {
	t.Helper()
	sub, err := p.Subscribe(context.Background(), 0)
	require.NoError(t, err)
	out, err := enginetest.ReadAll(context.Background(), sub)
	require.NoError(t, err)
	return out
}

func kinds(evs []eventlog.Event) []string { return enginetest.Kinds(evs) }

// requireTimeline checks O5 and O7 on a finished pair's timeline: sequences
// 1..n without gaps, pair.started first, exactly one pair terminal and it
// is last, each relayed run's events gap-free in its own sequence, and every
// relayed run.started with exactly one run terminal. It returns the
// terminal's payload.
func requireTimeline(t testing.TB, evs []eventlog.Event) orchestrator.Ended {
	t.Helper()
	require.NotEmpty(t, evs)
	require.Equal(t, orchestrator.KindStarted, evs[0].Kind())
	type runKey struct {
		worker string
		run    id.Run
	}
	lastSeq := map[runKey]uint64{}
	ended := map[runKey]int{}
	terminals := 0
	for i, e := range evs {
		require.Equal(t, uint64(i+1), e.Seq(), "timeline gap at %d", i)
		if orchestrator.Terminal(e.Kind()) {
			terminals++
			require.Equal(t, len(evs)-1, i, "the pair terminal must be the last event")
		}
		r, ok := e.Payload().(orchestrator.Relayed)
		if !ok {
			continue
		}
		k := runKey{r.Worker(), r.RunID()}
		require.Equal(t, lastSeq[k]+1, r.RunSeq(), "relayed run sequence gap in %v", k)
		lastSeq[k] = r.RunSeq()
		switch e.Kind() {
		case event.KindRunStarted:
			require.Equal(t, uint64(1), r.RunSeq())
		case event.KindRunCompleted, event.KindRunFailed, event.KindRunCancelled:
			ended[k]++
		}
	}
	require.Equal(t, 1, terminals, "exactly one pair terminal")
	for k := range lastSeq {
		require.Equal(t, 1, ended[k], "run %v must have exactly one terminal", k)
	}
	end, ok := evs[len(evs)-1].Payload().(orchestrator.Ended)
	require.True(t, ok)
	return end
}

// relayed returns the relayed events of kind.
func relayed(evs []eventlog.Event, kind string) []orchestrator.Relayed {
	var out []orchestrator.Relayed
	for _, e := range evs {
		if r, ok := e.Payload().(orchestrator.Relayed); ok && e.Kind() == kind {
			out = append(out, r)
		}
	}
	return out
}

// handoffs returns the pair.handoff payloads.
func handoffs(evs []eventlog.Event) []orchestrator.HandedOff {
	var out []orchestrator.HandedOff
	for _, e := range evs {
		if h, ok := e.Payload().(orchestrator.HandedOff); ok {
			out = append(out, h)
		}
	}
	return out
}

// jsonOf returns a payload's canonical JSON after checking it is valid
// JSON of exactly EncodedLen bytes.
func jsonOf(t testing.TB, p eventlog.Payload) string {
	t.Helper()
	b := p.AppendJSON(nil)
	require.True(t, json.Valid(b), "invalid JSON: %s", b)
	require.Equal(t, len(b), p.EncodedLen())
	return string(b)
}

// loggingSource wraps a plan.Memory and logs every lease it hands out and
// every release, in order: "lease plan-1", "exact plan-1", "release-exact
// plan-1", "release plan-1". releaseErr makes the release of leases taken
// with Lease fail; leaseErr makes Lease fail.
type loggingSource struct {
	inner      *plan.Memory
	releaseErr error
	leaseErr   error

	mu  sync.Mutex
	log []string
}

func (s *loggingSource) add(entry string) {
	s.mu.Lock()
	s.log = append(s.log, entry)
	s.mu.Unlock()
}

func (s *loggingSource) Log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

func (s *loggingSource) Lease(ctx context.Context) (*plan.Lease, error) {
	if s.leaseErr != nil {
		return nil, s.leaseErr
	}
	l, err := s.inner.Lease(ctx)
	if err != nil {
		return nil, err
	}
	return s.wrap("", l)
}

func (s *loggingSource) LeaseExact(ctx context.Context, planID plan.ID) (*plan.Lease, error) {
	l, err := s.inner.LeaseExact(ctx, planID)
	if err != nil {
		return nil, err
	}
	return s.wrap("exact", l)
}

func (s *loggingSource) wrap(how string, l *plan.Lease) (*plan.Lease, error) {
	name := string(l.Plan().ID())
	lease, release := "lease "+name, "release "+name
	if how != "" {
		lease, release = how+" "+name, "release-"+how+" "+name
	}
	s.add(lease)
	return plan.NewLease(l.Plan(), func() error {
		s.add(release)
		if err := l.Release(context.Background()); err != nil {
			return err
		}
		if how == "" {
			return s.releaseErr
		}
		return nil
	}, plan.LeaseConfig{Inline: true})
}

// hookProvider calls hook before each operation of inner; a non-nil error
// from hook is returned instead of a stream.
type hookProvider struct {
	inner model.Provider
	hook  func(ctx context.Context, n int) error

	mu sync.Mutex
	n  int
}

func (p *hookProvider) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	p.mu.Lock()
	p.n++
	n := p.n
	p.mu.Unlock()
	if err := p.hook(ctx, n); err != nil {
		return nil, err
	}
	return p.inner.Stream(ctx, req)
}

// counter counts tool executions.
type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) inc() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// countedEcho is enginetest.Echo that counts its executions.
func countedEcho(c *counter) tool.Tool {
	echo := enginetest.Echo()
	return enginetest.Tool{Def: echo.Def, Fn: func(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
		c.inc()
		return echo.Fn(ctx, call, r)
	}}
}
