package compose_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// The store cannot import orchestrator (it sits below it), so it spells
// the pair timeline's kinds and fields itself. This package may import
// both: a timeline encoded by orchestrator's own payload types must come
// out of the store with every name read, so that a rename on either side
// fails here rather than leaving pairs that the store records as running
// with no workers, runs or reason.
func TestStoreReadsThePairTimelineSchemaOrchestratorWrites(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "schema.db"))
	require.NoError(t, err)
	defer st.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	for _, c := range []struct {
		reason orchestrator.Reason
		kind   string
		status store.Status
	}{
		{orchestrator.ReasonCompleted, orchestrator.KindCompleted, store.StatusCompleted},
		{orchestrator.ReasonWorkerFailed, orchestrator.KindFailed, store.StatusFailed},
		{orchestrator.ReasonCancelled, orchestrator.KindCancelled, store.StatusCancelled},
	} {
		t.Run(c.kind, func(t *testing.T) {
			pairID, runID := "pair-"+string(c.status), "run-"+string(c.status)
			l, err := eventlog.New(eventlog.Config{Name: pairID, MaxEvents: 16, MaxBytes: 1 << 20,
				Required: []eventlog.Observer{st}})
			require.NoError(t, err)

			started := orchestrator.Started{PairID: pairID, PlanID: "plan-1", Pattern: "relay",
				First: "writer", Second: "reviewer"}
			require.Equal(t, orchestrator.KindStarted, started.Kind())
			_, err = l.Append(ctx, eventlog.Record{Kind: started.Kind(), Time: t0, Payload: started})
			require.NoError(t, err)

			run := event.Record(t0, event.RunStarted{RunID: id.Run(runID), PlanID: "plan-1", PlanFingerprint: "ab", Definition: "writer"})
			run.Payload = orchestrator.NewRelayed("writer", id.Run(runID), 7, run.Payload)
			_, err = l.Append(ctx, run)
			require.NoError(t, err)

			ended := orchestrator.Ended{PairID: pairID, Reason: c.reason, Worker: "writer"}
			require.Equal(t, c.kind, ended.Kind())
			_, err = l.Append(ctx, eventlog.Record{Kind: ended.Kind(), Time: t0.Add(time.Second), Terminal: true, Payload: ended})
			require.NoError(t, err)

			rec, err := st.Pair(ctx, pairID)
			require.NoError(t, err)
			require.Equal(t, c.status, rec.Summary.Status, "the terminal kind")
			require.Equal(t, "plan-1", rec.Summary.PlanID, orchestrator.FieldPlanID)
			require.Equal(t, []string{"writer", "reviewer"}, rec.Summary.Workers, "pair.started's workers")
			require.Contains(t, rec.Summary.Reason, c.reason.String(), orchestrator.FieldReason)
			require.Len(t, rec.Runs, 1, "the relayed run")
			require.Equal(t, runID, rec.Runs[0].ID, orchestrator.FieldRunID)
			require.Equal(t, "writer", rec.Runs[0].Worker, orchestrator.FieldWorker)
			require.Len(t, rec.Events, 3)
			relayed := rec.Events[1]
			require.True(t, relayed.Relayed)
			require.Equal(t, uint64(7), relayed.RunSeq, orchestrator.FieldRunSeq)
			require.IsType(t, event.RunStarted{}, relayed.Payload, orchestrator.FieldPayload)
		})
	}
}
