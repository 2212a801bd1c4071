package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/workers"
)

// cycling returns a scripted provider that answers text to every request.
func cycling(text string) *enginetest.Provider {
	p := enginetest.NewProvider(enginetest.Answer(text))
	p.Cycle = true
	return p
}

func definition(t testing.TB, name string) engine.Definition {
	t.Helper()
	d, err := engine.NewDefinition(engine.DefinitionConfig{Name: name, Model: "scripted-1", System: "Be brief.", MaxTurns: 4})
	require.NoError(t, err)
	return d
}

// relay is a relay pair of a writer and a reviewer on the given providers,
// with deterministic IDs and clock and no pair ID: the job ID names it.
func relay(t testing.TB, writer, reviewer model.Provider) *orchestrator.Config {
	t.Helper()
	plans, err := enginetest.Plan("plan-1")
	require.NoError(t, err)
	ids, clock := &id.Counter{}, &enginetest.Clock{}
	return &orchestrator.Config{
		Plans:   plans,
		First:   workersConfig(t, "writer", writer, ids, clock),
		Second:  workersConfig(t, "reviewer", reviewer, ids, clock),
		Pattern: orchestrator.Relay,
		Task:    "Write one line about the sea.",
	}
}

// newScheduler builds a scheduler with sequential job IDs and shuts it
// down when the test ends.
func newScheduler(t testing.TB, cfg scheduler.Config) *scheduler.Scheduler {
	t.Helper()
	if cfg.IDs == nil {
		cfg.IDs = scheduler.Sequential("job-")
	}
	s, err := scheduler.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
	return s
}

func submit(t testing.TB, s *scheduler.Scheduler, cfg *orchestrator.Config) string {
	t.Helper()
	jobID, err := s.Submit(context.Background(), scheduler.Job{Pair: cfg})
	require.NoError(t, err)
	return jobID
}

func wait(t testing.TB, s *scheduler.Scheduler, jobID string) scheduler.Info {
	t.Helper()
	info, err := s.Wait(context.Background(), jobID)
	require.NoError(t, err)
	return info
}

// held is a provider whose operations wait until Release (or until their
// context ends), then answer. Started receives one value per operation.
type held struct {
	inner   model.Provider
	started chan struct{}
	release chan struct{}
	once    sync.Once
	calls   atomic.Int64
}

func newHeld(text string) *held {
	return &held{inner: cycling(text), started: make(chan struct{}, 1024), release: make(chan struct{})}
}

func (h *held) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	h.calls.Add(1)
	h.started <- struct{}{}
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.inner.Stream(ctx, req)
}

func (h *held) Release() { h.once.Do(func() { close(h.release) }) }

// gauge is an atomic counter that remembers its maximum.
type gauge struct{ cur, max atomic.Int64 }

func (g *gauge) inc() { g.see(g.cur.Add(1)) }

// see records n as a value the gauge had.
func (g *gauge) see(n int64) {
	for m := g.max.Load(); n > m && !g.max.CompareAndSwap(m, n); m = g.max.Load() {
	}
}

func (g *gauge) dec() { g.cur.Add(-1) }

// counting wraps a provider and counts its model operations in flight: from
// Stream until the stream's terminal item, error or Close, exactly once.
// Inside a synctest bubble, hold keeps each operation open that long.
type counting struct {
	inner model.Provider
	g     *gauge
	hold  time.Duration
}

func (c *counting) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	c.g.inc()
	if c.hold > 0 {
		time.Sleep(c.hold) // fake time: a slow model
	}
	st, err := c.inner.Stream(ctx, req)
	if err != nil {
		c.g.dec()
		return nil, err
	}
	return &countedStream{inner: st, g: c.g}, nil
}

type countedStream struct {
	inner model.Stream
	g     *gauge
	ended bool
}

func (s *countedStream) Recv() (model.Item, error) {
	it, err := s.inner.Recv()
	if err != nil || it.IsTerminal() {
		s.end()
	}
	return it, err
}

func (s *countedStream) Close() error {
	s.end()
	return s.inner.Close()
}

func (s *countedStream) end() {
	if !s.ended {
		s.ended = true
		s.g.dec()
	}
}

// pairGauge is a timeline observer that counts pairs between pair.started
// and their terminal, and records the order in which pairs started.
type pairGauge struct {
	g       gauge
	mu      sync.Mutex
	started []string
	check   func() // optional: called at every pair.started
}

func (p *pairGauge) Observe(_ context.Context, e eventlog.Event) error {
	switch {
	case e.Kind() == orchestrator.KindStarted:
		p.g.inc()
		p.mu.Lock()
		p.started = append(p.started, e.Payload().(orchestrator.Started).PairID)
		p.mu.Unlock()
		if p.check != nil {
			p.check()
		}
	case orchestrator.Terminal(e.Kind()):
		p.g.dec()
	}
	return nil
}

func (p *pairGauge) order() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.started...)
}

// readTimeline reads a subscription to its end.
func readTimeline(ctx context.Context, sub *eventlog.Subscription) ([]eventlog.Event, error) {
	defer sub.Close()
	var evs []eventlog.Event
	for e, err := range sub.All(ctx) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, e)
	}
	return evs, nil
}

func workersConfig(t testing.TB, role string, p model.Provider, ids id.Source, clock engine.Clock) workers.Config {
	t.Helper()
	return workers.Config{Role: role, Definition: definition(t, role),
		Engine: engine.Config{Provider: p, IDs: ids, Clock: clock}}
}

// checkTimeline checks a finished pair's whole timeline (O7): sequences
// 1..n without a gap, pair.started for pairID first, exactly one pair
// terminal and it is last, every relayed run gap-free in its own sequence
// with exactly one run terminal. It returns the terminal's payload.
func checkTimeline(pairID string, evs []eventlog.Event) (orchestrator.Ended, error) {
	var none orchestrator.Ended
	if len(evs) == 0 || evs[0].Kind() != orchestrator.KindStarted {
		return none, fmt.Errorf("%s: timeline does not open with pair.started", pairID)
	}
	if got := evs[0].Payload().(orchestrator.Started).PairID; got != pairID {
		return none, fmt.Errorf("%s: timeline of pair %s", pairID, got)
	}
	type runKey struct {
		worker string
		run    id.Run
	}
	last, ended := map[runKey]uint64{}, map[runKey]int{}
	terminals := 0
	for i, e := range evs {
		if e.Seq() != uint64(i+1) {
			return none, fmt.Errorf("%s: gap at %d: seq %d", pairID, i+1, e.Seq())
		}
		if orchestrator.Terminal(e.Kind()) {
			terminals++
			if i != len(evs)-1 {
				return none, fmt.Errorf("%s: pair terminal at %d of %d", pairID, i+1, len(evs))
			}
		}
		r, ok := e.Payload().(orchestrator.Relayed)
		if !ok {
			continue
		}
		k := runKey{r.Worker(), r.RunID()}
		if r.RunSeq() != last[k]+1 {
			return none, fmt.Errorf("%s: run %v gap at run seq %d", pairID, k, r.RunSeq())
		}
		last[k] = r.RunSeq()
		if event.Terminal(e.Kind()) && strings.HasPrefix(e.Kind(), "run.") {
			ended[k]++
		}
	}
	if terminals != 1 {
		return none, fmt.Errorf("%s: %d pair terminals", pairID, terminals)
	}
	for k := range last {
		if ended[k] != 1 {
			return none, fmt.Errorf("%s: run %v has %d terminals", pairID, k, ended[k])
		}
	}
	return evs[len(evs)-1].Payload().(orchestrator.Ended), nil
}

// gaugedBehindHeld returns a first job's config whose writer holds until
// released, a config for the jobs behind it, and the gauge both report
// their pairs to: the opening of the tests that queue jobs behind a held
// slot and check the order they start in.
func gaugedBehindHeld(t testing.TB) (g *pairGauge, block *held, first, rest *orchestrator.Config) {
	g, block = &pairGauge{}, newHeld("First.")
	first = relay(t, block, cycling("OK."))
	rest = relay(t, cycling("Draft."), cycling("OK."))
	first.Timeline.Required = []eventlog.Observer{g}
	rest.Timeline.Required = []eventlog.Observer{g}
	return g, block, first, rest
}
