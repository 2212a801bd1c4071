package engine_test

import (
	"context"
	"errors"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// toolRound is the kinds of one turn that calls one tool, without deltas.
var toolRound = []string{"turn.started", "model.started", "model.completed", "tool.started", "tool.completed", "turn.completed"}

// answerTurn is the kinds of one turn that answers with one text delta.
var answerTurn = []string{"turn.started", "model.started", "model.text_delta", "model.completed", "turn.completed"}

func concatKinds(parts ...[]string) []string { return slices.Concat(parts...) }

func TestK22_ToolLoop(t *testing.T) {
	f := newFixture(t, fixtureConfig{
		tools: []tool.Tool{enginetest.Echo()},
		script: [][]model.Item{
			{enginetest.Text("Let me check."), enginetest.Call("call-1", "echo", `{"x":1}`), enginetest.Done(10, 5)},
			{enginetest.Text("The answer"), enginetest.Text(" is 1."), enginetest.Done(20, 7)},
		},
	})
	f.provider.Record = true
	r, res, err := f.run(t, 4)
	require.NoError(t, err)

	evs := events(t, r)
	require.Equal(t, []string{
		"run.started",
		"turn.started", "model.started", "model.text_delta", "model.completed",
		"tool.started", "tool.completed", "turn.completed",
		"turn.started", "model.started", "model.text_delta", "model.text_delta", "model.completed", "turn.completed",
		"run.completed",
	}, kinds(evs))
	requireWellFormed(t, evs)
	require.Equal(t, kinds(evs), f.rec.Kinds())
	require.Equal(t, event.ModelCompleted{OperationID: "op-1", InputTokens: 10, OutputTokens: 5, ToolCalls: 1}, evs[4].Payload())
	require.Equal(t, event.ToolStarted{TurnID: "turn-1", OperationID: "op-2", CallID: "call-1", Name: "echo", Effect: "read_only", Replay: "safe"}, evs[5].Payload())
	require.Equal(t, event.ToolCompleted{OperationID: "op-2", CallID: "call-1", Name: "echo", Content: `{"x":1}`}, evs[6].Payload())
	require.Equal(t, event.RunCompleted{RunID: "run-1", Turns: 2, InputTokens: 30, OutputTokens: 12, FinalText: "The answer is 1."}, evs[14].Payload())

	// The second request carries the assistant's call and the tool result.
	reqs := f.provider.Requests()
	require.Len(t, reqs, 2)
	require.Equal(t, 1, reqs[0].NumMessages())
	require.Equal(t, id.Operation("op-3"), reqs[1].Operation())
	require.Equal(t, []string{"echo"}, toolNames(reqs[1].Tools()))
	msgs := slices.Collect(reqs[1].Messages())
	require.Len(t, msgs, 3)
	require.Equal(t, message.RoleUser, msgs[0].Role())
	require.Equal(t, "hello", msgs[0].Text())
	require.Equal(t, message.RoleAssistant, msgs[1].Role())
	require.Equal(t, "Let me check.", msgs[1].Text())
	calls := slices.Collect(msgs[1].Calls())
	require.Len(t, calls, 1)
	require.Equal(t, id.Call("call-1"), calls[0].ID())
	require.Equal(t, "echo", calls[0].Name())
	require.JSONEq(t, `{"x":1}`, calls[0].ArgumentsString())
	require.Equal(t, message.RoleTool, msgs[2].Role())
	results := slices.Collect(msgs[2].Results())
	require.Len(t, results, 1)
	require.Equal(t, id.Call("call-1"), results[0].CallID())
	require.Equal(t, `{"x":1}`, results[0].Content())

	// The final answer is the result and the last message of the history.
	require.Equal(t, engine.Completed, res.Status)
	require.Equal(t, message.RoleAssistant, res.Final.Role())
	require.Equal(t, "The answer is 1.", res.Final.Text())
	require.Equal(t, 2, res.Turns)
	require.Equal(t, int64(30), res.Usage.Input())
	require.Equal(t, int64(12), res.Usage.Output())
	require.Equal(t, uint64(15), res.LastSeq)
	h := runHistory(t, r)
	require.Len(t, h, 4)
	require.Equal(t, message.RoleAssistant, h[3].Role())
	require.Equal(t, "The answer is 1.", h[3].Text())
	require.Zero(t, h[3].NumCalls())
}

func toolNames(defs iter.Seq[tool.Definition]) []string {
	var out []string
	for d := range defs {
		out = append(out, d.Name())
	}
	return out
}

func TestK7_ProblemResultContinuesLoop(t *testing.T) {
	notFound := problem.Must("not_found", "no such key")
	lookup := readOnlyTool(t, "lookup", func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		return tool.NewProblemResult(call.ID(), notFound, "try another key")
	})
	f := newFixture(t, fixtureConfig{
		tools:  []tool.Tool{lookup},
		script: [][]model.Item{{enginetest.Call("call-1", "lookup", `{"k":"a"}`), enginetest.Done(1, 1)}, enginetest.Answer("Not found.")},
	})
	f.provider.Record = true
	r, res, err := f.run(t, 4)
	require.NoError(t, err)
	require.Equal(t, engine.Completed, res.Status)
	require.Equal(t, "Not found.", res.Final.Text())
	evs := events(t, r)
	require.Equal(t, concatKinds([]string{"run.started"}, toolRound, answerTurn, []string{"run.completed"}), kinds(evs))
	requireWellFormed(t, evs)
	require.Equal(t, event.ToolCompleted{OperationID: "op-2", CallID: "call-1", Name: "lookup", Content: "try another key", Problem: notFound}, evs[5].Payload())

	// The model saw the problem.
	reqs := f.provider.Requests()
	require.Len(t, reqs, 2)
	msgs := slices.Collect(reqs[1].Messages())
	results := slices.Collect(msgs[2].Results())
	require.Len(t, results, 1)
	p, ok := results[0].Problem()
	require.True(t, ok)
	require.Equal(t, notFound, p)
}

func TestK7_ExecutionErrorFailsRun(t *testing.T) {
	diskFull := problem.Must("disk_full", "the disk is full")
	broken := readOnlyTool(t, "broken", func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		return tool.Result{}, tool.Fail(call.ID(), diskFull)
	})
	f := newFixture(t, fixtureConfig{
		tools:  []tool.Tool{broken},
		script: oneCallScript("broken"),
	})
	r, res, err := f.run(t, 4)
	evs := events(t, r)
	require.Equal(t, failedCallKinds, kinds(evs))
	requireWellFormed(t, evs)
	require.Equal(t, event.ToolFailed{OperationID: "op-2", CallID: "call-1", Name: "broken", Outcome: "definitive", Retry: "no_retry", Problem: diskFull}, evs[5].Payload())
	require.Equal(t, event.TurnFailed{TurnID: "turn-1", Index: 1, Problem: diskFull}, evs[6].Payload())
	require.Equal(t, event.RunFailed{RunID: "run-1", Problem: diskFull, Turns: 0, InputTokens: 1, OutputTokens: 1}, evs[7].Payload())

	requireFailure(t, err, "disk_full")
	var ee *tool.ExecutionError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, id.Call("call-1"), ee.CallID())
	require.Equal(t, tool.Definitive, ee.Outcome())
	require.Equal(t, engine.Failed, res.Status)
	require.Equal(t, diskFull, res.Problem)
	require.Equal(t, 1, f.provider.Calls(), "no model request after the failure")
}

func TestK22_UnknownToolGetsProblem(t *testing.T) {
	f := newFixture(t, fixtureConfig{
		tools:  []tool.Tool{enginetest.Echo()},
		script: [][]model.Item{{enginetest.Call("call-1", "rm_rf", `{}`), enginetest.Done(1, 1)}, enginetest.Answer("Sorry.")},
	})
	f.provider.Record = true
	r, res, err := f.run(t, 4)
	require.NoError(t, err)
	require.Equal(t, "Sorry.", res.Final.Text())
	evs := events(t, r)
	require.Equal(t, concatKinds([]string{"run.started"}, toolRound, answerTurn, []string{"run.completed"}), kinds(evs))
	requireWellFormed(t, evs)
	require.Equal(t, event.ToolStarted{TurnID: "turn-1", OperationID: "op-2", CallID: "call-1", Name: "rm_rf"}, evs[4].Payload(),
		"an unknown tool has no effect or replay safety")
	done := payloadOf[event.ToolCompleted](t, evs[5])
	require.Equal(t, "unknown_tool", done.Problem.Code())

	results := slices.Collect(slices.Collect(f.provider.Requests()[1].Messages())[2].Results())
	require.Len(t, results, 1)
	p, ok := results[0].Problem()
	require.True(t, ok)
	require.Equal(t, "unknown_tool", p.Code())
}

func TestK22_MaxTurns(t *testing.T) {
	call := func(n string) []model.Item {
		return []model.Item{enginetest.Call(n, "echo", `{}`), enginetest.Done(1, 1)}
	}
	f := newFixture(t, fixtureConfig{
		tools:  []tool.Tool{enginetest.Echo()},
		script: [][]model.Item{call("call-1"), call("call-2"), call("call-3")},
	})
	r, res, err := f.run(t, 2)
	requireFailure(t, err, engine.CodeMaxTurns)
	require.Equal(t, engine.Failed, res.Status)
	require.Equal(t, engine.CodeMaxTurns, res.Problem.Code())
	require.Equal(t, 2, res.Turns)
	require.Equal(t, 2, f.provider.Calls(), "no third model operation")
	evs := events(t, r)
	require.Equal(t, concatKinds([]string{"run.started"}, toolRound, toolRound, []string{"run.failed"}), kinds(evs))
	requireWellFormed(t, evs)
	ended := payloadOf[event.RunFailed](t, evs[len(evs)-1])
	require.Equal(t, engine.CodeMaxTurns, ended.Problem.Code())
	require.Equal(t, 2, ended.Turns)
}

func TestK23_MalformedStream(t *testing.T) {
	zeroItem := providerFunc(func(context.Context, model.Request) (model.Stream, error) {
		return &funcStream{recv: itemsThen(errInjected, enginetest.Text("a"), model.Item{})}, nil
	})
	runStreamCases(t, []streamCase{
		{name: "item after terminal", items: []model.Item{enginetest.Text("a"), enginetest.Done(1, 1), enginetest.Text("b")},
			kinds: modelFailure(1), code: engine.CodeStream, observed: true, violation: model.Malformed},
		{name: "second terminal", items: []model.Item{enginetest.Text("a"), enginetest.Done(1, 1), enginetest.Done(1, 1)},
			kinds: modelFailure(1), code: engine.CodeStream, observed: true, violation: model.Malformed},
		{name: "missing terminal", items: []model.Item{enginetest.Text("a"), enginetest.Text("b")},
			kinds: modelFailure(2), code: engine.CodeStream, observed: true, violation: model.Malformed},
		{name: "empty stream", items: nil,
			kinds: modelFailure(0), code: engine.CodeStream, observed: false, violation: model.Malformed},
		{name: "completed without content", items: []model.Item{enginetest.Done(1, 1)},
			kinds: modelFailure(0), code: engine.CodeStream, observed: true, violation: model.Malformed},
		{name: "duplicate call ID", items: []model.Item{enginetest.Call("c", "echo", `{}`), enginetest.Call("c", "echo", `{}`), enginetest.Done(1, 1)},
			kinds: modelFailure(0), code: engine.CodeStream, observed: true, violation: model.Malformed},
		{name: "zero item", provider: zeroItem,
			kinds: modelFailure(1), code: engine.CodeStream, observed: true, violation: model.Malformed},
	})
}

func TestK23_OversizedStream(t *testing.T) {
	delta := enginetest.Text(strings.Repeat("a", bound.MaxTextDeltaBytes))
	n := bound.MaxTextPerOperation/bound.MaxTextDeltaBytes + 1
	text := slices.Repeat([]model.Item{delta}, n)
	var calls []model.Item
	for i := range bound.MaxToolCallsPerOperation + 1 {
		calls = append(calls, enginetest.Call("call-"+string(rune('a'+i%26))+string(rune('a'+i/26)), "echo", `{}`))
	}
	runStreamCases(t, []streamCase{
		{name: "text over the operation bound", items: append(text, enginetest.Done(1, 1)),
			kinds: modelFailure(n - 1), code: engine.CodeStream, observed: true, violation: model.Oversized, exceeded: true},
		{name: "too many tool calls", items: append(calls, enginetest.Done(1, 1)),
			kinds: modelFailure(0), code: engine.CodeStream, observed: true, violation: model.Oversized, exceeded: true},
	})
}

func TestK23_FailingStream(t *testing.T) {
	reset := providerFunc(func(context.Context, model.Request) (model.Stream, error) {
		return &funcStream{recv: itemsThen(errInjected, enginetest.Text("partial"))}, nil
	})
	runStreamCases(t, []streamCase{
		{name: "failed item after text", items: []model.Item{enginetest.Text("partial"), enginetest.Fail("overloaded", "try later")},
			kinds: modelFailure(1), code: "overloaded", observed: true},
		{name: "failed item first", items: []model.Item{enginetest.Fail("overloaded", "try later")},
			kinds: modelFailure(0), code: "overloaded", observed: true},
		{name: "recv error after text", provider: reset,
			kinds: modelFailure(1), code: engine.CodeStream, observed: true},
	})

	// The Recv error is the failure's cause.
	f := newFixture(t, fixtureConfig{mutate: func(c *engine.Config) { c.Provider = reset }})
	_, _, err := f.run(t, 4)
	require.ErrorIs(t, err, errInjected)
}

func TestK23_ProviderErrorBeforeStream(t *testing.T) {
	pe, err := model.NewProviderError(model.ProviderErrorConfig{
		Problem: problem.Must("unavailable", "the model is unavailable"), Retryable: true, RetryAfter: time.Second, Cause: errInjected,
	})
	require.NoError(t, err)
	typed := providerFunc(func(context.Context, model.Request) (model.Stream, error) { return nil, pe })
	untyped := providerFunc(func(context.Context, model.Request) (model.Stream, error) { return nil, errInjected })
	nothing := providerFunc(func(context.Context, model.Request) (model.Stream, error) { return nil, nil })
	runStreamCases(t, []streamCase{
		{name: "provider error", provider: typed, kinds: modelFailure(0), code: "unavailable", observed: false},
		{name: "untyped error", provider: untyped, kinds: modelFailure(0), code: engine.CodeProvider, observed: false},
		{name: "no stream and no error", provider: nothing, kinds: modelFailure(0), code: engine.CodeProvider, observed: false},
	})

	f := newFixture(t, fixtureConfig{mutate: func(c *engine.Config) { c.Provider = typed }})
	_, _, err = f.run(t, 4)
	var got *model.ProviderError
	require.ErrorAs(t, err, &got)
	require.Same(t, pe, got)
	require.ErrorIs(t, err, errInjected)
}

func TestK23_NeverRetriedAfterItems(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream func() model.Stream
	}{
		{"recv error after an item", func() model.Stream {
			return &funcStream{recv: itemsThen(errInjected, enginetest.Text("a"))}
		}},
		{"failed item", func() model.Stream {
			return &funcStream{recv: itemsThen(nil, enginetest.Fail("overloaded", "retry later"))}
		}},
		{"malformed after an item", func() model.Stream {
			return &funcStream{recv: itemsThen(nil, enginetest.Text("a"), model.Item{})}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &countingProvider{stream: tc.stream}
			f := newFixture(t, fixtureConfig{mutate: func(c *engine.Config) { c.Provider = p }})
			r, _, err := f.run(t, 8)
			var failure *engine.Failure
			require.ErrorAs(t, err, &failure)
			require.Equal(t, 1, p.calls, "Stream was called again after items were observed")
			evs := events(t, r)
			require.Equal(t, 1, countOf(kinds(evs), "model.started"))
			require.True(t, payloadOf[event.ModelFailed](t, evs[len(evs)-3]).Observed)
		})
	}
}

// leaseSource is a plan.Source whose Lease and LeaseExact are functions.
type leaseSource struct {
	lease func(ctx context.Context, planID plan.ID) (*plan.Lease, error)
	calls int
}

func (s *leaseSource) Lease(ctx context.Context) (*plan.Lease, error) {
	s.calls++
	return s.lease(ctx, "")
}

func (s *leaseSource) LeaseExact(ctx context.Context, planID plan.ID) (*plan.Lease, error) {
	s.calls++
	return s.lease(ctx, planID)
}

func TestK13_LeaseBeforeIDsAndEvents(t *testing.T) {
	errNoPlan := errors.New("no plan today")
	src := &leaseSource{lease: func(context.Context, plan.ID) (*plan.Lease, error) { return nil, errNoPlan }}
	ids := &countingIDs{}
	rec := &enginetest.Recorder{}
	p := enginetest.NewProvider(enginetest.Answer("never"))
	e, err := engine.New(engine.Config{Provider: p, Plans: src, IDs: ids, Clock: &enginetest.Clock{},
		Required: []eventlog.Observer{rec}})
	require.NoError(t, err)

	for _, in := range []engine.Input{{Message: user(t, "hello")}, {Message: user(t, "hello"), Plan: "plan-7"}} {
		r, err := e.Start(context.Background(), definition(t, 4), in)
		require.ErrorIs(t, err, errNoPlan)
		require.Nil(t, r)
	}
	require.Equal(t, 2, src.calls)

	// Invalid input is refused before the lease.
	_, err = e.Start(context.Background(), engine.Definition{}, engine.Input{Message: user(t, "hello")})
	require.ErrorIs(t, err, bound.ErrInvalid)
	_, err = e.Start(context.Background(), definition(t, 4), engine.Input{})
	require.ErrorIs(t, err, bound.ErrInvalid)
	require.Equal(t, 2, src.calls, "the lease comes after input validation")

	require.Zero(t, ids.calls.Load(), "no ID before the lease")
	require.Empty(t, rec.Events(), "no event before the lease")
	require.Zero(t, p.Calls())
	require.NoError(t, e.Close(context.Background()))

	// An exact plan ID is leased even when a newer plan is current, and
	// every request of the run uses it.
	plans, err := enginetest.Plan("plan-1", enginetest.Echo())
	require.NoError(t, err)
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{readOnlyTool(t, "other", nil)}})
	require.NoError(t, err)
	newer, err := plan.New("plan-2", d)
	require.NoError(t, err)
	require.NoError(t, plans.Activate(newer))
	p = enginetest.NewProvider(enginetest.Answer("one"), enginetest.Answer("two"))
	p.Record = true
	e, err = engine.New(engine.Config{Provider: p, Plans: plans, IDs: &id.Counter{}, Clock: &enginetest.Clock{}})
	require.NoError(t, err)

	hold, err := e.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello"), Plan: "plan-1"})
	require.NoError(t, err)
	_, err = waitRun(hold)
	require.NoError(t, err)
	require.Equal(t, plan.ID("plan-1"), hold.Plan().ID)
	started := payloadOf[event.RunStarted](t, events(t, hold)[0])
	require.Equal(t, "plan-1", started.PlanID)
	require.Equal(t, plans.Current().ID(), plan.ID("plan-2"))

	current, err := e.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello")})
	require.NoError(t, err)
	_, err = waitRun(current)
	require.NoError(t, err)
	require.Equal(t, plan.ID("plan-2"), current.Plan().ID)

	reqs := p.Requests()
	require.Len(t, reqs, 2)
	require.Equal(t, []string{"echo"}, toolNames(reqs[0].Tools()))
	require.Equal(t, []string{"other"}, toolNames(reqs[1].Tools()))
	require.Zero(t, plans.Outstanding("plan-1"), "the lease was released")
	require.Zero(t, plans.Outstanding("plan-2"))

	_, err = e.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello"), Plan: "plan-9"})
	require.ErrorIs(t, err, plan.ErrUnknownPlan)
	require.NoError(t, e.Close(context.Background()))
}

func TestK21_NewValidatesConfig(t *testing.T) {
	plans, err := enginetest.Plan("plan-1")
	require.NoError(t, err)
	valid := func() engine.Config {
		return engine.Config{Provider: enginetest.NewProvider(), Plans: plans, IDs: &id.Counter{}, Clock: &enginetest.Clock{}}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*engine.Config)
		field  string
		rule   bound.Rule
	}{
		{"no provider", func(c *engine.Config) { c.Provider = nil }, "engine.provider", bound.Required},
		{"no plans", func(c *engine.Config) { c.Plans = nil }, "engine.plans", bound.Required},
		{"no ids", func(c *engine.Config) { c.IDs = nil }, "engine.ids", bound.Required},
		{"no clock", func(c *engine.Config) { c.Clock = nil }, "engine.clock", bound.Required},
		{"nil required observer", func(c *engine.Config) { c.Required = []eventlog.Observer{nil} }, "engine.required[]", bound.Required},
		{"nil best-effort observer", func(c *engine.Config) { c.BestEffort = []eventlog.Observer{nil} }, "engine.best_effort[]", bound.Required},
		{"negative max turns", func(c *engine.Config) { c.Limits.MaxTurns = -1 }, "engine.limits", bound.Malformed},
		{"negative mailbox", func(c *engine.Config) { c.Limits.Mailbox = -1 }, "engine.limits", bound.Malformed},
		{"too few events", func(c *engine.Config) { c.Limits.MaxEvents = 15 }, "engine.limits.max_events", bound.Malformed},
		{"too few bytes", func(c *engine.Config) { c.Limits.MaxBytes = 1024 }, "engine.limits.max_bytes", bound.Malformed},
		{"negative finalize timeout", func(c *engine.Config) { c.FinalizeTimeout = -time.Second }, "engine.finalize_timeout", bound.Malformed},
		{"finalize timeout too long", func(c *engine.Config) { c.FinalizeTimeout = engine.MaxFinalizeTimeout + 1 }, "engine.finalize_timeout", bound.Malformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid()
			tc.mutate(&cfg)
			e, err := engine.New(cfg)
			require.Nil(t, e)
			var be *bound.Error
			require.ErrorAs(t, err, &be)
			require.Equal(t, tc.field, be.Field)
			require.Equal(t, tc.rule, be.Rule)
			require.ErrorIs(t, err, bound.ErrInvalid)
		})
	}

	// The engine's MaxTurns caps every definition.
	cfg := valid()
	cfg.Limits.MaxTurns = 3
	e, err := engine.New(cfg)
	require.NoError(t, err)
	_, err = e.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello")})
	var be *bound.Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, "definition.max_turns", be.Field)
	require.Equal(t, bound.TooMany, be.Rule)
	require.Equal(t, 3, be.Limit)
	require.NoError(t, e.Close(context.Background()))
}
