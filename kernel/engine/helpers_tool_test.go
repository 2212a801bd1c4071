package engine_test

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/interaction"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Helpers for tool calls: tools, gates, dispatchers, plan sources, brokers
// and suspended tool runs (finalize, close, interaction, snapshot and fuzz
// tests).

type toolFunc = func(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error)

// newTool builds a tool named name. A read-only tool is replay safe, a
// mutating one unsafe.
func newTool(t testing.TB, name string, effect tool.Effect, fn toolFunc) enginetest.Tool {
	t.Helper()
	replay := tool.Safe
	if effect == tool.Mutating {
		replay = tool.Unsafe
	}
	def, err := tool.NewDefinition(tool.DefinitionConfig{Name: name, Description: "Test tool " + name + ".", Effect: effect, Replay: replay})
	require.NoError(t, err)
	return enginetest.Tool{Def: def, Fn: fn}
}

// callOp is a script entry in which the model asks for one tool call.
func callOp(callID, name string) []model.Item {
	return []model.Item{enginetest.Call(callID, name, `{}`), enginetest.Done(10, 5)}
}

// gate is a tool body that signals entered and then waits for release,
// ignoring its context, the way a tool stuck in a system call would.
type gate struct {
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) tool(t testing.TB, name string) enginetest.Tool {
	return newTool(t, name, tool.ReadOnly, func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		close(g.entered)
		<-g.release
		return tool.NewResult(call.ID(), "released")
	})
}

// eventsAfter reads every event after seq of a finished run.
func eventsAfter(t testing.TB, r *engine.Run, after uint64) []eventlog.Event {
	t.Helper()
	sub, err := r.Subscribe(context.Background(), after)
	require.NoError(t, err)
	var out []eventlog.Event
	for e, err := range sub.All(context.Background()) {
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

// countKind returns how many events have a kind starting with prefix.
func countKind(evs []eventlog.Event, prefix string) int {
	n := 0
	for _, e := range evs {
		if strings.HasPrefix(e.Kind(), prefix) {
			n++
		}
	}
	return n
}

// runTerminals counts run.completed, run.failed and run.cancelled events.
func runTerminals(evs []eventlog.Event) int {
	n := 0
	for _, e := range evs {
		if strings.HasPrefix(e.Kind(), "run.") && isTerminal(e.Kind()) {
			n++
		}
	}
	return n
}

// payload returns the payload of the only event of kind in evs.
func payload[T any](t testing.TB, evs []eventlog.Event, kind string) T {
	t.Helper()
	var found []eventlog.Event
	for _, e := range evs {
		if e.Kind() == kind {
			found = append(found, e)
		}
	}
	require.Len(t, found, 1, "events of kind %s", kind)
	p, ok := found[0].Payload().(T)
	require.True(t, ok, "payload of %s is %T", kind, found[0].Payload())
	return p
}

// leakCheck fails the test if it leaves goroutines behind that were not
// running when it started.
func leakCheck(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// releaseSource is a third-party plan.Source: its leases are built with
// plan.NewLease around a release callback the test controls (K14).
type releaseSource struct {
	plan    plan.Plan
	release func() error
	cfg     plan.LeaseConfig
}

func (s *releaseSource) Lease(context.Context) (*plan.Lease, error) {
	return plan.NewLease(s.plan, s.release, s.cfg)
}

func (s *releaseSource) LeaseExact(_ context.Context, planID plan.ID) (*plan.Lease, error) {
	if planID != s.plan.ID() {
		return nil, &plan.IDError{ID: planID, Err: plan.ErrUnknownPlan}
	}
	return plan.NewLease(s.plan, s.release, s.cfg)
}

// brokerFunc adapts a function to interaction.Broker.
type brokerFunc func(ctx context.Context, q interaction.Question) (interaction.Answer, error)

func (f brokerFunc) Ask(ctx context.Context, q interaction.Question) (interaction.Answer, error) {
	return f(ctx, q)
}

// answering is a broker that answers every question with text.
func answering(text string) brokerFunc {
	return func(_ context.Context, q interaction.Question) (interaction.Answer, error) {
		return interaction.NewAnswer(q.ID(), text), nil
	}
}

// fixedIxSource allocates like a Counter but always hands out the same
// interaction ID, as a broken or restarted ID source would.
type fixedIxSource struct {
	id.Counter
	ix string
}

func (s *fixedIxSource) New(k id.Kind) string {
	if k == id.KindInteraction {
		return s.ix
	}
	return s.Counter.New(k)
}

// rawDispatcher hands the engine's reporter to its tools unwrapped, unlike
// the canonical dispatcher, so tests reach the engine's own guards.
type rawDispatcher struct{ tools []enginetest.Tool }

func (d *rawDispatcher) Definitions() iter.Seq[tool.Definition] {
	return func(yield func(tool.Definition) bool) {
		for _, t := range d.tools {
			if !yield(t.Def) {
				return
			}
		}
	}
}

func (d *rawDispatcher) Lookup(name string) (tool.Definition, bool) {
	i := slices.IndexFunc(d.tools, func(t enginetest.Tool) bool { return t.Def.Name() == name })
	if i < 0 {
		return tool.Definition{}, false
	}
	return d.tools[i].Def, true
}

func (d *rawDispatcher) Dispatch(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
	def, _ := d.Lookup(call.Name())
	i := slices.IndexFunc(d.tools, func(t enginetest.Tool) bool { return t.Def.Name() == def.Name() })
	return d.tools[i].Fn(ctx, call, r)
}

// asker is a tool named "ask" that asks "Proceed?" with the choices yes
// and no. It records what Ask returned. A failed question becomes a
// model-visible problem, so the run goes on; a cancelled run cancels the
// call.
type asker struct {
	mu     sync.Mutex
	answer []string
	errs   []error
}

var problemAskFailed = problem.Must("ask_failed", "the question could not be answered")

func (a *asker) tool(t testing.TB) enginetest.Tool {
	return newTool(t, "ask", tool.ReadOnly, func(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
		ask, ok := r.(interaction.Asker)
		if !ok {
			return tool.NewProblemResult(call.ID(), problemAskFailed, "no asker")
		}
		ans, err := ask.Ask(ctx, "Proceed?", "yes", "no")
		a.mu.Lock()
		a.answer, a.errs = append(a.answer, ans), append(a.errs, err)
		a.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return tool.Result{}, tool.Canceled(call.ID(), ctx.Err())
			}
			return tool.NewProblemResult(call.ID(), problemAskFailed, "")
		}
		return tool.NewResult(call.ID(), ans)
	})
}

func (a *asker) results() ([]string, []error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.answer), slices.Clone(a.errs)
}

// suspendOnFirstModel makes the fixture's required observer suspend the
// run when it sees the run's first model.started, so that the run stops
// after turn 1. It returns a function to call with the started run.
func suspendOnFirstModel(f *fixture) func(*engine.Run) {
	ready := make(chan *engine.Run, 1)
	var once sync.Once
	f.rec.Hook = func(ctx context.Context, e eventlog.Event) error {
		if e.Kind() != "model.started" {
			return nil
		}
		once.Do(func() {
			select {
			case r := <-ready:
				r.Suspend()
			case <-ctx.Done():
			}
		})
		return nil
	}
	return func(r *engine.Run) { ready <- r }
}

// suspendedToolRun runs a tool run (turn 1 calls "ask", answered "yes";
// turn 2 would answer) that is suspended after turn 1, and returns its
// snapshot.
func suspendedToolRun(t testing.TB) (*fixture, []byte) {
	t.Helper()
	return suspendedToolRunWith(t, nil)
}

// suspendedToolRunWith is suspendedToolRun on an engine config that mutate
// changes further.
func suspendedToolRunWith(t testing.TB, mutate func(*engine.Config)) (*fixture, []byte) {
	t.Helper()
	a := &asker{}
	f := newFixture(t, fixtureConfig{
		tools:  []tool.Tool{a.tool(t)},
		script: [][]model.Item{callOp("call-1", "ask"), enginetest.Answer("done")},
		mutate: func(c *engine.Config) {
			c.Broker = answering("yes")
			if mutate != nil {
				mutate(c)
			}
		},
	})
	arm := suspendOnFirstModel(f)
	r, err := f.eng.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello")})
	require.NoError(t, err)
	arm(r)
	_, err = r.Wait(context.Background())
	require.ErrorIs(t, err, engine.ErrSuspended)
	b, err := r.Snapshot()
	require.NoError(t, err)
	return f, b
}
