package orchestrator_test

import (
	"iter"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
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
