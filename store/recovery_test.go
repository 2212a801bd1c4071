package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/store"
)

// appendAll appends payloads to l at successive times.
func appendAll(t *testing.T, l *eventlog.Log, ps ...event.Payload) {
	t.Helper()
	for i, p := range ps {
		_, err := l.Append(context.Background(), event.Record(t0.Add(time.Duration(i)*time.Millisecond), p))
		require.NoError(t, err)
	}
}

func TestRecoveryMarksInterruptedOnceAndTerminalStillWins(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	st, err := store.Open(ctx, path)
	require.NoError(t, err)
	l := newLog(t, "run-1", st)
	appendAll(t, l,
		event.RunStarted{RunID: "run-1", PlanID: "plan-1", PlanFingerprint: "ab"},
		event.TurnStarted{RunID: "run-1", TurnID: "turn-1"},
		event.ToolStarted{TurnID: "turn-1", OperationID: "op-read", CallID: "c1", Name: "read", Effect: "read_only", Replay: "safe"},
		event.ToolStarted{TurnID: "turn-1", OperationID: "op-write", CallID: "c2", Name: "write", Effect: "mutating", Replay: "unsafe"},
	)
	require.NoError(t, st.Close())

	st, err = store.Open(ctx, path)
	require.NoError(t, err)
	rec := st.Recovery()
	require.Equal(t, []string{"run-1"}, rec.Runs)
	require.Empty(t, rec.Pairs)
	require.Len(t, rec.Uncertain, 1)
	require.Equal(t, "op-write", rec.Uncertain[0].OperationID)
	run, err := st.Run(ctx, "run-1")
	require.NoError(t, err)
	require.Equal(t, store.StatusInterrupted, run.Summary.Status)
	require.Len(t, run.Calls, 2)
	require.Equal(t, store.CallInterrupted, run.Calls[0].Status, "a read-only call is interrupted, not uncertain")
	require.Equal(t, store.CallUncertain, run.Calls[1].Status)
	require.Equal(t, []store.Call{run.Calls[1]}, run.Uncertain)
	require.NoError(t, st.Close())

	// A second open reports nothing new; the marks stay.
	st, err = store.Open(ctx, path)
	require.NoError(t, err)
	require.True(t, st.Recovery().IsZero())
	run, err = st.Run(ctx, "run-1")
	require.NoError(t, err)
	require.Equal(t, store.StatusInterrupted, run.Summary.Status)
	require.Len(t, run.Uncertain, 1)

	// A terminal recorded later is the truth.
	l2, err := eventlog.New(eventlog.Config{Name: "run-1", MaxEvents: 64, MaxBytes: 1 << 20, After: 4, Required: []eventlog.Observer{st}})
	require.NoError(t, err)
	appendAll(t, l2,
		event.ToolFailed{OperationID: "op-write", CallID: "c2", Name: "write", Outcome: "uncertain", Retry: "never", Problem: problem.Must("lost", "process ended")},
		event.RunFailed{RunID: "run-1", Problem: problem.Must("interrupted", "process ended")},
	)
	run, err = st.Run(ctx, "run-1")
	require.NoError(t, err)
	require.Equal(t, store.StatusFailed, run.Summary.Status)
	require.Equal(t, "interrupted", run.Summary.ProblemCode)
	require.Len(t, run.Uncertain, 1, "a call that ended uncertain stays uncertain")
	require.Equal(t, store.CallFailed, run.Uncertain[0].Status)
	require.Equal(t, "uncertain", run.Uncertain[0].Outcome)
	require.NoError(t, st.Close())
}

// A pair timeline recorded without its runs' own logs still tells which
// runs the pair had and which mutating call is uncertain: relayed events
// carry them.
func TestRecoveryFromRelayedEventsAlone(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	st, err := store.Open(ctx, path)
	require.NoError(t, err)
	timeline := newLog(t, "pair-1", st)
	_, err = timeline.Append(ctx, eventlog.Record{Kind: "pair.started", Time: t0,
		Payload: raw(t, `{"pair_id":"pair-1","plan_id":"plan-9","workers":[{"name":"writer"},{"role":"reviewer"},7]}`)})
	require.NoError(t, err)
	run := newLog(t, "run-7", relay{pair: timeline, worker: "writer"})
	appendAll(t, run,
		event.RunStarted{RunID: "run-7", PlanID: "plan-9", PlanFingerprint: "ab"},
		event.ToolStarted{TurnID: "turn-1", OperationID: "op-1", CallID: "c1", Name: "write", Effect: "mutating", Replay: "unsafe"},
	)
	require.NoError(t, st.Close())

	st = open(t, path)
	require.Equal(t, []string{"pair-1"}, st.Recovery().Pairs)
	require.Equal(t, []string{"run-7"}, st.Recovery().Runs)
	pair, err := st.Pair(ctx, "pair-1")
	require.NoError(t, err)
	require.Equal(t, store.StatusInterrupted, pair.Summary.Status)
	require.Equal(t, "plan-9", pair.Summary.PlanID)
	require.Equal(t, []string{"writer", "reviewer"}, pair.Summary.Workers)
	require.Len(t, pair.Runs, 1)
	require.Equal(t, "writer", pair.Runs[0].Worker)
	require.Len(t, pair.Uncertain, 1)
	require.Equal(t, uint64(2), pair.Uncertain[0].StartedSeq, "the run's own sequence, from the relay")
	rr, err := st.Run(ctx, "run-7")
	require.NoError(t, err)
	require.Equal(t, store.StatusInterrupted, rr.Summary.Status)
	require.Len(t, rr.Uncertain, 1)
	// The run's log is read back out of the timeline, as a resume reads it.
	require.Len(t, rr.Events, 2)
	require.Equal(t, event.KindRunStarted, rr.Events[0].Event.Kind())
	require.IsType(t, event.ToolStarted{}, rr.Events[1].Payload)
	require.Equal(t, uint64(2), rr.Events[1].Event.Seq())
}

func TestPairTerminalReasonShapes(t *testing.T) {
	ctx := context.Background()
	st := open(t, dbPath(t))
	for i, c := range []struct {
		kind, payload, reason string
		status                store.Status
	}{
		{"pair.completed", `{"reason":"approved"}`, "approved", store.StatusCompleted},
		{"pair.failed", `{"reason":{"code":"worker_failed","message":"writer failed"}}`, "worker_failed: writer failed", store.StatusFailed},
		{"pair.failed", `{"problem":{"code":"budget_exhausted"}}`, "budget_exhausted", store.StatusFailed},
		{"pair.cancelled", `{"reason":17}`, "", store.StatusCancelled},
		{"pair.failed", `{"pair_id":"p","reason":"worker_failed","rounds":1,"runs":1,"input_tokens":1,"output_tokens":1,"tool_calls":0,"worker":"writer","run_id":"run-1","problem":{"code":"model_failed","message":"boom"}}`,
			"worker_failed (writer, model_failed: boom)", store.StatusFailed},
		{"pair.failed", `{"pair_id":"p","reason":"budget_exhausted","limit":"tokens","rounds":2,"runs":3,"input_tokens":1,"output_tokens":1,"tool_calls":0}`,
			"budget_exhausted (tokens)", store.StatusFailed},
	} {
		id := fmt.Sprintf("pair-%d", i)
		l := newLog(t, id, st)
		_, err := l.Append(ctx, eventlog.Record{Kind: "pair.started", Time: t0, Payload: raw(t, `{"workers":"not a list"}`)})
		require.NoError(t, err)
		_, err = l.Append(ctx, eventlog.Record{Kind: c.kind, Time: t0.Add(3 * time.Second), Terminal: true, Payload: raw(t, c.payload)})
		require.NoError(t, err)
		p, err := st.Pair(ctx, id)
		require.NoError(t, err)
		require.Equal(t, c.status, p.Summary.Status, id)
		require.Equal(t, c.reason, p.Summary.Reason, id)
		require.Empty(t, p.Summary.Workers)
		require.Equal(t, 3*time.Second, p.Summary.Duration())
	}
}

// Close races with many observers: each event is either acknowledged and
// then found in the file, or refused with ErrClosed; none is acknowledged
// and lost.
func TestK16_CloseNeverLosesAnAcknowledgedEvent(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	st, err := store.Open(ctx, path)
	require.NoError(t, err)
	const logs, per = 8, 10
	acked := make([][]uint64, logs)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range logs {
		rec := &eventRecorder{}
		l := newLog(t, fmt.Sprintf("run-%d", i), rec)
		for j := range per {
			_, err := l.Append(ctx, event.Record(t0, event.ToolProgress{OperationID: "op-1", CallID: "c", Message: fmt.Sprint(j)}))
			require.NoError(t, err)
		}
		wg.Go(func() {
			<-start
			for _, e := range rec.events {
				switch err := st.Observe(ctx, e); {
				case err == nil:
					acked[i] = append(acked[i], e.Seq())
				case !isClosed(err):
					t.Errorf("unexpected error: %v", err)
					return
				}
			}
		})
	}
	close(start)
	require.NoError(t, st.Close())
	wg.Wait()

	st = open(t, path)
	for i := range logs {
		if len(acked[i]) == 0 {
			continue
		}
		out := replay(t, st, fmt.Sprintf("run-%d", i))
		for _, seq := range acked[i] {
			require.Contains(t, string(out), fmt.Sprintf(`{"seq":%d,`, seq))
		}
	}
}

func isClosed(err error) bool { return errors.Is(err, store.ErrClosed) }
