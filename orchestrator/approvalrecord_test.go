package orchestrator_test

import (
	"context"
	"encoding/json"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// writerPayloads returns the writer's run events of a recorded timeline.
func writerPayloads(evs []eventlog.Event) iter.Seq[eventlog.Payload] {
	return func(yield func(eventlog.Payload) bool) {
		for _, e := range evs {
			if r, ok := e.Payload().(orchestrator.Relayed); ok && r.Worker() == "writer" && !yield(r.Payload()) {
				return
			}
		}
	}
}

// TestR2_AnUnansweredApprovalMeansTheCallNeverRan: the record of a pair
// whose process stopped while a question waited (cut where the question
// is pending) has the call's tool.started without an outcome, which alone
// reads as uncertain; ReadApprovals shows the same question waiting, and
// the call as one that never ran. An approved call is neither; a denied
// one never ran.
func TestR2_AnUnansweredApprovalMeansTheCallNeverRan(t *testing.T) {
	for _, approve := range []bool{true, false} {
		dir := t.TempDir()
		var (
			b      *orchestrator.Approvals
			h      *harness
			asked  orchestrator.Approval
			atStop []eventlog.Event
		)
		b, err := orchestrator.NewApprovals(orchestrator.ApprovalsConfig{OnQuestion: func(a orchestrator.Approval) {
			// Here a SIGKILL would leave the record as it is now.
			asked, atStop = a, h.timeline.Events()
			require.NoError(t, b.Answer(a.Pair, a.Question, a.Digest, approve))
		}})
		require.NoError(t, err)
		h = writePair(t, dir, b, orchestrator.ApprovalConfig{Policy: orchestrator.ApproveMutating, Timeout: time.Minute})
		_, _, err = h.run(t)
		require.NoError(t, err)

		require.Len(t, relayed(atStop, event.KindToolStarted), 1)
		require.Empty(t, relayed(atStop, event.KindToolCompleted), "the record has the call started and no outcome")
		cut := orchestrator.ReadApprovals(writerPayloads(atStop))
		require.Len(t, cut.Waiting, 1)
		w := cut.Waiting[0]
		require.Equal(t, asked.Question, w.Question, "the same question")
		require.Equal(t, asked.Digest, w.Digest)
		require.Equal(t, asked, w)
		require.Equal(t, map[id.Call]bool{asked.Call: true}, cut.NotRun)

		whole := orchestrator.ReadApprovals(writerPayloads(h.timeline.Events()))
		require.Empty(t, whole.Waiting)
		if approve {
			require.Empty(t, whole.NotRun, "an approved call ran")
		} else {
			require.Equal(t, map[id.Call]bool{asked.Call: true}, whole.NotRun)
		}
	}
}

// recorded converts timeline events into the form a store holds them in.
func recorded(t *testing.T, evs []eventlog.Event) []orchestrator.RecordedEvent {
	t.Helper()
	out := make([]orchestrator.RecordedEvent, 0, len(evs))
	for _, e := range evs {
		var env struct {
			Payload json.RawMessage `json:"payload"`
		}
		require.NoError(t, json.Unmarshal(e.AppendJSON(nil), &env))
		out = append(out, orchestrator.RecordedEvent{Seq: e.Seq(), Kind: e.Kind(), Payload: env.Payload})
	}
	return out
}

// TestR2_AQuestionLeftWaitingIsAskedAgainOnResume: a pair whose process
// stopped while a question waited resumes (the call is not uncertain: it
// never ran, though its tool may not run twice), the model operation that
// made the call is served from the journal, the same question comes back
// with the same digest (bound to the interrupted run's ID, which the
// restarted run keeps), and the tool runs once, after the answer.
func TestR2_AQuestionLeftWaitingIsAskedAgainOnResume(t *testing.T) {
	fx := &effects{}
	ac := orchestrator.ApprovalConfig{Policy: orchestrator.ApproveMutating, Timeout: time.Minute}
	build := func(writer script, b *orchestrator.Approvals) *harness {
		h := newHarness(t, orchestrator.Relay, writer, script{enginetest.Answer("fine")}, writeTool(t, fx, tool.Unsafe))
		h.cfg.First.Engine.Broker, h.cfg.Second.Engine.Broker = b, b
		h.cfg.Approval = ac
		h.cfg.Timeline.Journal = true
		return h
	}
	var (
		b      *orchestrator.Approvals
		h      *harness
		asked  orchestrator.Approval
		atStop []eventlog.Event
	)
	b, err := orchestrator.NewApprovals(orchestrator.ApprovalsConfig{OnQuestion: func(a orchestrator.Approval) {
		// A SIGKILL here leaves the record as it is now; the first
		// process is then denied, so it writes nothing.
		asked, atStop = a, h.timeline.Events()
		require.NoError(t, b.Answer(a.Pair, a.Question, a.Digest, false))
	}})
	require.NoError(t, err)
	h = build(script{
		{enginetest.Call("call-1", "write", `{"key":"k"}`), enginetest.Done(1, 1)},
		enginetest.Answer("gave up"),
	}, b)
	_, _, err = h.run(t)
	require.NoError(t, err)
	require.Empty(t, fx.get())

	// The second process: the writer's model has only what comes after
	// the call; asking it for the call again would get the wrong answer.
	var again []orchestrator.Approval
	var b2 *orchestrator.Approvals
	b2, err = orchestrator.NewApprovals(orchestrator.ApprovalsConfig{OnQuestion: func(a orchestrator.Approval) {
		again = append(again, a)
		require.NoError(t, b2.Answer(a.Pair, a.Question, a.Digest, true))
	}})
	require.NoError(t, err)
	h2 := build(script{enginetest.Answer("wrote it")}, b2)
	p, err := orchestrator.RunResumed(context.Background(), orchestrator.ResumeConfig{Pair: h2.cfg, Timeline: recorded(t, atStop)})
	require.NoError(t, err, "the waiting call never ran: it is not uncertain")
	res, err := p.Wait(context.Background())
	require.NoError(t, err)
	require.Equal(t, "fine", res.Final.Text())

	require.Len(t, again, 1, "asked once more, and only about the waiting call")
	require.Equal(t, asked.Digest, again[0].Digest, "the same question: the same digest")
	require.Equal(t, asked.Call, again[0].Call)
	require.Equal(t, asked.Run, again[0].Run)
	require.JSONEq(t, string(asked.Arguments), string(again[0].Arguments))
	require.Equal(t, 1, h2.first.Calls(), "the model operation that made the call is not asked again")
	require.Equal(t, map[string]int{"k": 1}, fx.get(), "the tool ran once, after the answer")
}

// TestR2_ARecordedApprovedCallIsNotAskedAgain: a call approved and ended
// before the process stopped has its outcome served on resume, and its
// question is not asked again.
func TestR2_ARecordedApprovedCallIsNotAskedAgain(t *testing.T) {
	fx := &effects{}
	ac := orchestrator.ApprovalConfig{Policy: orchestrator.ApproveMutating, Timeout: time.Minute}
	var asked int
	var b *orchestrator.Approvals
	b, err := orchestrator.NewApprovals(orchestrator.ApprovalsConfig{OnQuestion: func(a orchestrator.Approval) {
		asked++
		require.NoError(t, b.Answer(a.Pair, a.Question, a.Digest, true))
	}})
	require.NoError(t, err)
	build := func(writer script) *harness {
		h := newHarness(t, orchestrator.Relay, writer, script{enginetest.Answer("fine")}, writeTool(t, fx, tool.Unsafe))
		h.cfg.First.Engine.Broker, h.cfg.Second.Engine.Broker = b, b
		h.cfg.Approval = ac
		h.cfg.Timeline.Journal = true
		return h
	}
	h := build(script{{enginetest.Call("call-1", "write", `{"key":"k"}`), enginetest.Done(1, 1)}, enginetest.Answer("wrote it")})
	_, _, err = h.run(t)
	require.NoError(t, err)
	require.Equal(t, 1, asked)
	evs := h.timeline.Events()
	n := slices.IndexFunc(evs, func(e eventlog.Event) bool {
		r, ok := e.Payload().(orchestrator.Relayed)
		_, done := r.Payload().(event.ToolCompleted)
		return ok && done
	})
	require.Positive(t, n)
	cut := evs[:n+1] // the process stopped right after the call's outcome

	h2 := build(script{enginetest.Answer("wrote it")})
	p, err := orchestrator.RunResumed(context.Background(), orchestrator.ResumeConfig{Pair: h2.cfg, Timeline: recorded(t, cut)})
	require.NoError(t, err)
	_, err = p.Wait(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, asked, "the recorded call's question is not asked again")
	require.Equal(t, map[string]int{"k": 1}, fx.get())
}
