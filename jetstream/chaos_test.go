package jetstream

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// chaosName is the backend of the chaos test and its worker processes.
const chaosName = "chaos"

// TestD1_D2_ThreeWorkersThreeHundredJobsSurviveKillAndTerm: three worker
// processes without a shared store play 300 pair jobs, every other one
// with its write tool declared idempotent. Once 30 jobs have ended, every
// tool call of worker A is held, and A is SIGKILLed when both of its
// pairs are held in a call; once 150 have ended, worker B is SIGTERMed
// and drains. Then:
//
//   - every job has ended, each with exactly one terminal status ever
//     written (counted from a watch on the state bucket);
//   - every pair's timeline on the events stream runs from sequence 1
//     without a gap and without an event stored twice, and ends in one
//     pair terminal, but for the pairs refused as uncertain;
//   - no model request was sent twice, and no call to a tool not
//     declared idempotent ran twice;
//   - each of A's two pairs was resumed on another worker (idempotent:
//     its held call ran again and the pair completed) or ended failed
//     uncertain_tool_call naming the held call.
func TestD1_D2_ThreeWorkersThreeHundredJobsSurviveKillAndTerm(t *testing.T) {
	const jobs = 300
	began := time.Now()
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	const name = chaosName
	b, err := Open(ctx, chaosConfig(connect(t, s.ClientURL())))
	require.NoError(t, err)
	tm := watchTerminals(t, b)
	l := newLoopback(t, "")

	fleet := func(tag string) []string { return []string{envResume + "=fleet", envTag + "=" + tag} }
	a := startPairWorker(t, s.ClientURL(), name, "", l, "spec", fleet("A")...)
	bw := startPairWorker(t, s.ClientURL(), name, "", l, "spec", fleet("B")...)
	startPairWorker(t, s.ClientURL(), name, "", l, "spec", fleet("C")...)

	idempotent := map[string]bool{}
	for i := range jobs {
		jobID := fmt.Sprintf("pair-%03d", i)
		spec := fmt.Sprintf("Write line %d about the sea.", i)
		if i%2 == 0 {
			spec += " [idempotent]"
			idempotent[jobID] = true
		}
		_, err := b.Submit(ctx, job.Job{ID: jobID, Spec: []byte(spec)})
		require.NoError(t, err)
	}

	tm.waitJobs(t, ctx, 30)
	l.mu.Lock()
	l.freeze = "A"
	l.mu.Unlock()
	var held []string // job/call
	for len(held) < 2 {
		select {
		case key := <-l.frozen:
			held = append(held, key)
		case <-ctx.Done():
			t.Fatalf("worker A held %v: %v", held, ctx.Err())
		}
	}
	require.NoError(t, a.Process.Signal(syscall.SIGKILL))
	_ = a.Wait()
	requireGone(t, a.Process.Pid)

	tm.waitJobs(t, ctx, jobs/2)
	require.NoError(t, bw.Process.Signal(syscall.SIGTERM))
	require.NoError(t, bw.Wait(), "worker B did not drain cleanly")
	requireGone(t, bw.Process.Pid)

	tm.waitJobs(t, ctx, jobs)
	tm.caughtUp(t, ctx)
	tm.mu.Lock()
	require.Len(t, tm.count, jobs)
	for jobID, n := range tm.count {
		require.Equal(t, 1, n, "job %s: terminal statuses", jobID)
	}
	tm.mu.Unlock()

	heldCall := map[string]string{} // job -> held call
	for _, key := range held {
		jobID, call, ok := strings.Cut(key, "/")
		require.True(t, ok, key)
		heldCall[jobID] = call
	}
	require.Len(t, heldCall, 2, "worker A held two calls of one pair: %v", held)
	timelines := streamTimelines(t, b)
	require.Len(t, timelines, jobs)
	models, tools := l.counts()
	for key, n := range models {
		require.Equal(t, 1, n, "model request %s was sent again", key)
	}
	calls := 0 // the calls made, each counted once
	for i := range jobs {
		jobID := fmt.Sprintf("pair-%03d", i)
		st, err := b.Status(ctx, jobID)
		require.NoError(t, err)
		tl := timelines[jobID]
		require.NotNil(t, tl, "job %s: no timeline", jobID)
		call, wasHeld := heldCall[jobID]
		switch {
		case !wasHeld:
			require.Equal(t, job.Completed, st.State, "job %s: %s: %s", jobID, st.Reason, st.Error)
			require.Equal(t, 1, tl.terminals, "job %s", jobID)
			require.Zero(t, tl.resumed, "job %s", jobID)
		case idempotent[jobID]:
			require.Equal(t, job.Completed, st.State, "job %s: %s: %s", jobID, st.Reason, st.Error)
			require.GreaterOrEqual(t, st.Attempt, 2)
			require.Equal(t, 1, tl.terminals, "job %s", jobID)
			require.Equal(t, 1, tl.resumed, "job %s", jobID)
			require.Equal(t, orchestrator.KindCompleted, tl.kinds[len(tl.kinds)-1])
		default:
			require.Equal(t, job.Failed, st.State, "job %s", jobID)
			require.Equal(t, orchestrator.ReasonUncertainCall, st.Reason, st.Error)
			require.Contains(t, st.Error, call)
			require.Zero(t, tl.terminals, "job %s: a refused pair publishes nothing", jobID)
		}
		for _, role := range []string{"writer", "reviewer"} {
			key := jobID + "/c-" + role
			want := 1
			switch {
			case wasHeld && idempotent[jobID] && call == "c-"+role:
				want = 2 // the held call, run again
			case wasHeld && !idempotent[jobID] && call == "c-writer" && role == "reviewer":
				want = 0 // the pair ended at the writer's call
			}
			require.Equal(t, want, tools[key], "call %s", key)
			calls += min(want, 1)
		}
	}
	require.Len(t, tools, calls, "calls of no job")
	t.Logf("%d jobs, a worker killed and one drained, in %v", jobs, time.Since(began).Round(time.Millisecond))
}
