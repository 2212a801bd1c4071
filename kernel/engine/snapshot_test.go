package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
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

// echoScript calls echo in turn 1 and answers "done" in turn 2.
func echoScript() [][]model.Item {
	return [][]model.Item{
		{enginetest.Call("call-1", "echo", `{"x":1}`), enginetest.Done(10, 5)},
		enginetest.Answer("done"),
	}
}

// suspendedEcho starts an echo run on f, suspends it in turn 1 and returns
// the run and its snapshot.
func suspendedEcho(t *testing.T, f *fixture) (*engine.Run, []byte) {
	t.Helper()
	arm := suspendOnFirstModel(f)
	r, err := f.eng.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello")})
	require.NoError(t, err)
	arm(r)
	res, err := r.Wait(context.Background())
	require.ErrorIs(t, err, engine.ErrSuspended)
	require.Equal(t, engine.Suspended, res.Status)
	b, err := r.Snapshot()
	require.NoError(t, err)
	return r, b
}

func echoFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixture(t, fixtureConfig{tools: []tool.Tool{enginetest.Echo()}, script: echoScript()})
}

// echoWith is an echo tool whose description differs from enginetest.Echo.
func echoWith(t *testing.T, description string) tool.Tool {
	t.Helper()
	e := enginetest.Echo()
	def, err := tool.NewDefinition(tool.DefinitionConfig{Name: "echo", Description: description, Effect: tool.ReadOnly, Replay: tool.Safe})
	require.NoError(t, err)
	e.Def = def
	return e
}

func TestK29_SnapshotRoundTripByteEqual(t *testing.T) {
	snap := func(t *testing.T) []byte {
		f := echoFixture(t)
		r, _, err := f.run(t, 4)
		require.NoError(t, err)
		b, err := r.Snapshot()
		require.NoError(t, err)
		again, err := r.Snapshot()
		require.NoError(t, err)
		require.Equal(t, b, again, "the same run encodes to the same bytes")
		require.NoError(t, f.eng.Close(context.Background()))
		return b
	}
	b := snap(t)
	require.Equal(t, b, snap(t), "two identical runs give identical snapshots")

	s, err := engine.DecodeSnapshot(b)
	require.NoError(t, err)
	re, err := engine.EncodeSnapshot(s)
	require.NoError(t, err)
	require.Equal(t, string(b), string(re), "decode and encode is a byte-equal round trip")

	require.Equal(t, id.Run("run-1"), s.RunID())
	require.Equal(t, engine.Completed, s.Status())
	require.Equal(t, 2, s.Turns())
	require.Equal(t, uint64(13), s.LastSeq())
	require.Equal(t, plan.ID("plan-1"), s.Plan().ID)
	require.Equal(t, "assistant", s.Definition().Name())
	hist := slices.Collect(s.History())
	require.Len(t, hist, 4, "user, assistant call, tool result, final answer")
	require.Equal(t, []message.Role{message.RoleUser, message.RoleAssistant, message.RoleTool, message.RoleAssistant},
		[]message.Role{hist[0].Role(), hist[1].Role(), hist[2].Role(), hist[3].Role()})
	require.Equal(t, "done", hist[3].Text())

	// A failed run keeps its problem through the round trip.
	f := newFixture(t, fixtureConfig{script: [][]model.Item{{enginetest.Fail("overloaded", "the model is overloaded")}}})
	r, _, err := f.run(t, 4)
	require.Error(t, err)
	fb, err := r.Snapshot()
	require.NoError(t, err)
	fs, err := engine.DecodeSnapshot(fb)
	require.NoError(t, err)
	require.Equal(t, engine.Failed, fs.Status())
	fre, err := engine.EncodeSnapshot(fs)
	require.NoError(t, err)
	require.Equal(t, string(fb), string(fre))
	require.NoError(t, f.eng.Close(context.Background()))

	_, err = engine.EncodeSnapshot(engine.Snapshot{})
	require.ErrorIs(t, err, bound.ErrInvalid, "the zero snapshot is not encoded")
}

func TestK29_SuspendAndResume(t *testing.T) {
	f := echoFixture(t)
	f.provider.Record = true
	r, b := suspendedEcho(t, f)

	first := events(t, r)
	require.Equal(t, []string{
		"run.started", "turn.started", "model.started", "model.completed",
		"tool.started", "tool.completed", "turn.completed",
	}, kinds(first), "suspended at the turn boundary, without a run terminal")
	require.Zero(t, runTerminals(first))
	require.Zero(t, f.plans.Outstanding("plan-1"), "a suspended run has released its lease")

	s, err := engine.DecodeSnapshot(b)
	require.NoError(t, err)
	require.Equal(t, engine.Suspended, s.Status())
	require.Equal(t, uint64(7), s.LastSeq())
	require.Equal(t, 1, s.Turns())

	r2, err := f.eng.Resume(context.Background(), b)
	require.NoError(t, err)
	require.Equal(t, r.ID(), r2.ID())
	require.Equal(t, s.Plan(), r2.Plan())
	res, err := r2.Wait(context.Background())
	require.NoError(t, err)
	require.Equal(t, engine.Completed, res.Status)
	require.Equal(t, 2, res.Turns)
	require.Equal(t, "done", res.Final.Text())
	require.Equal(t, int64(20), res.Usage.Input(), "usage carried over")
	require.Equal(t, uint64(13), res.LastSeq)

	second := eventsAfter(t, r2, s.LastSeq())
	require.Equal(t, []string{
		"turn.started", "model.started", "model.text_delta", "model.completed", "turn.completed", "run.completed",
	}, kinds(second))
	require.Equal(t, s.LastSeq()+1, second[0].Seq(), "the sequence continues after the snapshot's last")
	firstTurn := payload[event.TurnStarted](t, first, "turn.started")
	require.Equal(t, firstTurn.Index+1, payload[event.TurnStarted](t, second, "turn.started").Index, "the first event is turn 2's start")
	_, err = r2.Subscribe(context.Background(), 0)
	require.ErrorIs(t, err, eventlog.ErrOutOfRange, "the resumed log holds only its own events")

	union := append(slices.Clone(first), second...)
	requireWellFormed(t, union)
	require.Equal(t, 1, runTerminals(union))
	require.Equal(t, 1, countKind(union, "run.started"))
	require.Equal(t, kinds(union), f.rec.Kinds())

	reqs := f.provider.Requests()
	require.Len(t, reqs, 2)
	require.Equal(t, slices.Collect(s.History()), slices.Collect(reqs[1].Messages()),
		"turn 2's request holds the whole history")
	require.Equal(t, 3, reqs[1].NumMessages())
	require.Zero(t, f.plans.Outstanding("plan-1"))

	b2, err := r2.Snapshot()
	require.NoError(t, err)
	s2, err := engine.DecodeSnapshot(b2)
	require.NoError(t, err)
	require.Equal(t, engine.Completed, s2.Status())
	require.Equal(t, uint64(13), s2.LastSeq())
	_, err = f.eng.Resume(context.Background(), b2)
	require.ErrorIs(t, err, engine.ErrNotResumable)
	require.Zero(t, f.plans.Outstanding("plan-1"), "a refused resume gives its lease back")
	require.NoError(t, f.eng.Close(context.Background()))
}

func TestK29_ExportRefusedWhileActive(t *testing.T) {
	g := newGate()
	f := newFixture(t, fixtureConfig{
		tools:  []tool.Tool{g.tool(t, "block")},
		script: [][]model.Item{callOp("call-1", "block"), enginetest.Answer("done")},
	})
	r, err := f.eng.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello")})
	require.NoError(t, err)
	<-g.entered

	_, err = r.Snapshot()
	var re *engine.RefusedError
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, err, engine.ErrSnapshotRefused)

	close(g.release)
	_, err = r.Wait(context.Background())
	require.NoError(t, err)
	_, err = r.Snapshot()
	require.NoError(t, err, "an ended run exports")
	require.NoError(t, f.eng.Close(context.Background()))
}

func TestK29_ExportRefusedWithUncertainMutation(t *testing.T) {
	p := problem.Must("write_interrupted", "the write may have happened")
	for _, tc := range []struct {
		name      string
		fail      func(tool.Call) error
		outcome   string
		refused   bool
		wantProbl string
	}{
		{"uncertain", func(c tool.Call) error { return tool.FailUncertain(c.ID(), p, nil) }, "uncertain", true, "write_interrupted"},
		{"definitive", func(c tool.Call) error { return tool.Fail(c.ID(), p) }, "definitive", false, "write_interrupted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write := newTool(t, "write", tool.Mutating, func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
				return tool.Result{}, tc.fail(call)
			})
			f := newFixture(t, fixtureConfig{
				tools:  []tool.Tool{write},
				script: [][]model.Item{callOp("call-1", "write"), enginetest.Answer("never")},
			})
			r, res, err := f.run(t, 4)
			var ee *tool.ExecutionError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, tc.outcome, ee.Outcome().String())
			require.Equal(t, engine.Failed, res.Status)
			evs := events(t, r)
			require.Equal(t, failedCallKinds, kinds(evs))
			require.Equal(t, tc.outcome, payload[event.ToolFailed](t, evs, "tool.failed").Outcome)

			_, err = r.Snapshot()
			if !tc.refused {
				require.NoError(t, err)
				return
			}
			var re *engine.RefusedError
			require.ErrorAs(t, err, &re)
			require.ErrorIs(t, err, engine.ErrSnapshotRefused)
			require.NoError(t, f.eng.Close(context.Background()))
		})
	}
}

func TestK29_ImportRefusedForSubstitutedPlan(t *testing.T) {
	a := echoFixture(t)
	_, b := suspendedEcho(t, a)
	s, err := engine.DecodeSnapshot(b)
	require.NoError(t, err)

	// Another host holds a plan with the same ID whose echo tool says
	// something else: the same name, another contract.
	plans, err := enginetest.Plan("plan-1", echoWith(t, "Echoes its arguments, and more."))
	require.NoError(t, err)
	provider := enginetest.NewProvider(echoScript()...)
	rec := &enginetest.Recorder{}
	ids := &id.Counter{}
	eng, err := engine.New(engine.Config{Provider: provider, Plans: plans, IDs: ids, Clock: &enginetest.Clock{}, Required: []eventlog.Observer{rec}})
	require.NoError(t, err)

	r, err := eng.Resume(context.Background(), b)
	require.Nil(t, r)
	require.ErrorIs(t, err, plan.ErrMismatch)
	var me *plan.MismatchError
	require.ErrorAs(t, err, &me)
	require.Equal(t, s.Plan(), me.Want)
	require.Equal(t, plans.Current().Identity(), me.Got)

	require.Zero(t, plans.Outstanding("plan-1"), "the lease was released")
	require.Zero(t, provider.Calls(), "no model operation")
	require.Empty(t, rec.Kinds(), "no event")
	require.Equal(t, "run-1", ids.New(id.KindRun), "no ID was allocated")
	require.Equal(t, "turn-1", ids.New(id.KindTurn))
	require.NoError(t, eng.Close(context.Background()))
	require.NoError(t, a.eng.Close(context.Background()))
}

func TestK29_ImportLeasesExactPlan(t *testing.T) {
	f := echoFixture(t)
	f.provider.Record = true
	_, b := suspendedEcho(t, f)
	s, err := engine.DecodeSnapshot(b)
	require.NoError(t, err)

	newer, err := enginetest.Plan("plan-2", echoWith(t, "A newer echo."))
	require.NoError(t, err)
	require.NoError(t, f.plans.Activate(newer.Current()))
	require.Equal(t, plan.ID("plan-2"), f.plans.Current().ID())

	r, err := f.eng.Resume(context.Background(), b)
	require.NoError(t, err)
	require.Equal(t, s.Plan(), r.Plan(), "the snapshot's plan, not the current one")
	_, err = r.Wait(context.Background())
	require.NoError(t, err)

	reqs := f.provider.Requests()
	require.Len(t, reqs, 2)
	var descriptions []string
	for d := range reqs[1].Tools() {
		descriptions = append(descriptions, d.Description())
	}
	require.Equal(t, []string{"Echoes its arguments."}, descriptions, "turn 2 saw the old plan's tools")
	require.Zero(t, f.plans.Outstanding("plan-1"))
	require.Zero(t, f.plans.Outstanding("plan-2"), "the current plan was never leased")
	require.NoError(t, f.eng.Close(context.Background()))
}

func TestK29_ImportStrict(t *testing.T) {
	f, b := suspendedToolRun(t)
	calls := f.provider.Calls()

	// edit decodes the snapshot into generic JSON, changes it, and encodes
	// it again (keys in another order, which the decoder must accept).
	edit := func(change func(m map[string]any)) []byte {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var m map[string]any
		require.NoError(t, dec.Decode(&m))
		change(m)
		out, err := json.Marshal(m)
		require.NoError(t, err)
		return out
	}
	history := func(m map[string]any) []any { return m["history"].([]any) }
	msg := func(m map[string]any, i int) map[string]any { return history(m)[i].(map[string]any) }
	part := func(m map[string]any, i, j int) map[string]any {
		return msg(m, i)["parts"].([]any)[j].(map[string]any)
	}

	// Only the canonical form Snapshot writes is accepted: the same
	// document with its keys reordered, a key in another case, or a
	// duplicated key is refused, though encoding/json alone takes them.
	for name, input := range map[string][]byte{
		"reordered keys": edit(func(map[string]any) {}),
		"key case":       bytes.Replace(b, []byte(`"status":`), []byte(`"STATUS":`), 1),
		"duplicate key":  bytes.Replace(b, []byte(`"status":"suspended"`), []byte(`"status":"completed","status":"suspended"`), 1),
	} {
		_, err := engine.DecodeSnapshot(input)
		var be *bound.Error
		require.ErrorAs(t, err, &be, name)
		require.Equal(t, "snapshot", be.Field, name)
		require.Equal(t, bound.Malformed, be.Rule, name)
	}
	_, err := engine.DecodeSnapshot(b)
	require.NoError(t, err, "the canonical bytes decode")

	cases := []struct {
		name  string
		input []byte
		field string
		rule  bound.Rule
	}{
		{"unknown field", edit(func(m map[string]any) { m["extra"] = 1 }), "snapshot", bound.Malformed},
		{"unknown nested field", edit(func(m map[string]any) { m["definition"].(map[string]any)["temperature"] = 1 }), "snapshot", bound.Malformed},
		{"trailing document", append(slices.Clone(b), " {}"...), "snapshot", bound.Malformed},
		{"trailing byte", append(slices.Clone(b), 'x'), "snapshot", bound.Malformed},
		{"bad version", edit(func(m map[string]any) { m["version"] = 2 }), "snapshot.version", bound.Malformed},
		{"missing version", edit(func(m map[string]any) { delete(m, "version") }), "snapshot.version", bound.Malformed},
		{"over MaxSnapshotBytes", bytes.Repeat([]byte(" "), engine.MaxSnapshotBytes+1), "snapshot", bound.TooLarge},
		{"empty", nil, "snapshot", bound.Malformed},
		{"not an object", []byte(`[1]`), "snapshot", bound.Malformed},
		{"unknown status", edit(func(m map[string]any) { m["status"] = "running" }), "snapshot.status", bound.Malformed},
		{"bad run ID", edit(func(m map[string]any) { m["run_id"] = "run 1" }), "snapshot.run_id", bound.Malformed},
		{"bad fingerprint", edit(func(m map[string]any) { m["plan"].(map[string]any)["fingerprint"] = "ABC" }), "plan.fingerprint", bound.Malformed},
		{"turns over max", edit(func(m map[string]any) { m["turns"] = 99 }), "snapshot.turns", bound.Malformed},
		{"no last sequence", edit(func(m map[string]any) { m["last_seq"] = 0 }), "snapshot.last_seq", bound.Malformed},
		{"negative usage", edit(func(m map[string]any) { m["usage"].(map[string]any)["input"] = -1 }), "usage.input_tokens", bound.Malformed},
		{"empty history", edit(func(m map[string]any) { m["history"] = []any{} }), "snapshot.history", bound.Required},
		{"history starts with the assistant", edit(func(m map[string]any) { m["history"] = history(m)[1:] }), "snapshot.history", bound.Malformed},
		{"unknown role", edit(func(m map[string]any) { msg(m, 0)["role"] = "system" }), "message.role", bound.Malformed},
		{"unknown part type", edit(func(m map[string]any) { part(m, 0, 0)["type"] = "image" }), "snapshot.parts.type", bound.Malformed},
		{"empty text part", edit(func(m map[string]any) { part(m, 0, 0)["text"] = "" }), "part.text", bound.Required},
		{"bad call ID", edit(func(m map[string]any) { part(m, 1, 0)["call_id"] = "call 1" }), "tool_call.id", bound.Malformed},
		{"arguments not an object", edit(func(m map[string]any) { part(m, 1, 0)["arguments"] = []any{1} }), "tool_call.arguments", bound.Malformed},
		{"result without its call", edit(func(m map[string]any) { part(m, 2, 0)["call_id"] = "call-9" }),
			"request.messages[2].parts[0].tool_result.call_id", bound.Conflict},
		{"call answered twice", edit(func(m map[string]any) { m["history"] = append(history(m), history(m)[2]) }),
			"request.messages[3].parts[0].tool_result.call_id", bound.Conflict},
		{"duplicate interaction", edit(func(m map[string]any) { m["interactions"] = []any{"ix-1", "ix-1"} }), "snapshot.interactions", bound.Malformed},
		{"bad interaction ID", edit(func(m map[string]any) { m["interactions"] = []any{"ix 1"} }), "snapshot.interactions", bound.Malformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := engine.DecodeSnapshot(tc.input)
			var be *bound.Error
			require.ErrorAs(t, err, &be)
			require.ErrorIs(t, err, bound.ErrInvalid)
			require.Equal(t, tc.field, be.Field)
			require.Equal(t, tc.rule, be.Rule)
			if tc.rule == bound.TooLarge {
				require.ErrorIs(t, err, bound.ErrExceeded)
			}
			r, err := f.eng.Resume(context.Background(), tc.input)
			require.Nil(t, r)
			require.ErrorAs(t, err, &be, "Resume refuses it the same way")
			require.Zero(t, f.plans.Outstanding("plan-1"), "nothing was leased")
			require.Equal(t, calls, f.provider.Calls(), "nothing ran")
		})
	}
	require.NoError(t, f.eng.Close(context.Background()))
}

func TestK29_UsedInteractionIDsSurviveImport(t *testing.T) {
	a := &asker{}
	ids := &fixedIxSource{ix: "ix-1"}
	f := newFixture(t, fixtureConfig{
		tools:  []tool.Tool{a.tool(t)},
		script: [][]model.Item{callOp("call-1", "ask"), callOp("call-2", "ask"), enginetest.Answer("done")},
		mutate: func(c *engine.Config) {
			c.Broker = answering("yes")
			c.IDs = ids
		},
	})
	r, b := suspendedEcho(t, f)
	require.Equal(t, 1, countKind(events(t, r), "interaction.answered"))
	s, err := engine.DecodeSnapshot(b)
	require.NoError(t, err)
	require.Equal(t, []id.Interaction{"ix-1"}, slices.Collect(s.Interactions()))

	r2, err := f.eng.Resume(context.Background(), b)
	require.NoError(t, err)
	res, err := r2.Wait(context.Background())
	require.NoError(t, err)
	require.Equal(t, engine.Completed, res.Status)

	answers, errs := a.results()
	require.Equal(t, []string{"yes", ""}, answers)
	require.Len(t, errs, 2)
	require.NoError(t, errs[0])
	var fail *engine.Failure
	require.ErrorAs(t, errs[1], &fail, "the resumed run refused to reuse ix-1")
	require.Equal(t, engine.CodeInvalidID, fail.Problem.Code())

	second := eventsAfter(t, r2, s.LastSeq())
	require.Equal(t, []string{
		"turn.started", "model.started", "model.completed", "tool.started", "tool.completed", "turn.completed",
		"turn.started", "model.started", "model.text_delta", "model.completed", "turn.completed", "run.completed",
	}, kinds(second), "the refused question left no interaction event")
	require.Equal(t, problemAskFailed.Code(), payload[event.ToolCompleted](t, second, "tool.completed").Problem.Code())

	b2, err := r2.Snapshot()
	require.NoError(t, err)
	s2, err := engine.DecodeSnapshot(b2)
	require.NoError(t, err)
	require.Equal(t, []id.Interaction{"ix-1"}, slices.Collect(s2.Interactions()))
	require.NoError(t, f.eng.Close(context.Background()))
}

// A mutating call stopped mid-effect by the run's cancellation reports an
// uncertain outcome: the cancelled event keeps it, and the run cannot be
// exported in a snapshot (K7, K29).
func TestK29_CancelledMutatingCallKeepsUncertainOutcome(t *testing.T) {
	late := newLateRun()
	write := newTool(t, "write", tool.Mutating, func(ctx context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		late.get().Cancel()
		<-ctx.Done()
		return tool.Result{}, tool.FailUncertain(call.ID(), problem.Must("interrupted", "the write was interrupted"), ctx.Err())
	})
	f := newFixture(t, fixtureConfig{tools: []tool.Tool{write}, script: [][]model.Item{callOp("call-1", "write")}})
	r := f.start(t, context.Background(), 4)
	late.set(r)
	_, err := waitRun(r)
	require.ErrorIs(t, err, engine.ErrCancelled)
	evs := events(t, r)
	requireWellFormed(t, evs)
	require.Equal(t, "uncertain", payload[event.ToolCancelled](t, evs, "tool.cancelled").Outcome)
	_, err = r.Snapshot()
	require.ErrorIs(t, err, engine.ErrSnapshotRefused)
	require.NoError(t, f.eng.Close(context.Background()))
}

// Resuming the same snapshot twice while the first is active is refused:
// two runs never share an ID and a sequence (K29).
func TestK29_ResumeRefusesActiveRunID(t *testing.T) {
	f, b := suspendedToolRun(t)
	hold, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.rec.Hook = func(_ context.Context, e eventlog.Event) error {
		if e.Kind() == "turn.started" {
			once.Do(func() { close(hold); <-release })
		}
		return nil
	}
	first, err := f.eng.Resume(context.Background(), b)
	require.NoError(t, err)
	<-hold // the first resumed run is active
	_, err = f.eng.Resume(context.Background(), b)
	require.ErrorIs(t, err, engine.ErrRunActive)
	close(release)
	_, err = waitRun(first)
	require.NoError(t, err)
	require.Zero(t, f.plans.Outstanding("plan-1"), "the refused resume gave its lease back")
	require.NoError(t, f.eng.Close(context.Background()))
}

// A suspended run has ended when Wait returns, even while its log is still
// closing (a best-effort observer draining): resuming its snapshot at once
// is not refused as a duplicate, and Close still waits for both runs (K27,
// K29).
func TestK29_ResumeRightAfterWaitWhileTheOldLogCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		releaseOnce := sync.OnceFunc(func() { close(release) })
		defer releaseOnce() // also when a check fails: no goroutine stays blocked
		var blocked atomic.Bool
		stuck := make(chan struct{})
		slow := eventlog.ObserverFunc(func(context.Context, eventlog.Event) error {
			if blocked.CompareAndSwap(false, true) { // the first event only
				close(stuck)
				<-release
			}
			return nil
		})
		f, b := suspendedToolRunWith(t, func(c *engine.Config) {
			c.BestEffort = []eventlog.Observer{slow}
			c.FinalizeTimeout = time.Minute
		})
		<-stuck // the old run's log cannot finish closing until release
		f.rec.Hook = nil
		second, err := f.eng.Resume(context.Background(), b)
		require.NoError(t, err, "the suspended run has ended: its ID is free")
		_, err = waitRun(second)
		require.NoError(t, err)

		closed := make(chan error, 1)
		go func() { closed <- f.eng.Close(context.Background()) }()
		synctest.Wait() // everything else is blocked: Close is waiting
		select {
		case err := <-closed:
			t.Fatalf("Close returned %v while a run's observer was still draining", err)
		default:
		}
		releaseOnce()
		require.NoError(t, <-closed)
	})
}
