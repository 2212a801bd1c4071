package jetstream

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// restartName is the backend of the server restart test and its worker
// processes.
const restartName = "restartpairs"

// restartConfig is chaosConfig's AckWait, the default MaxDeliver: a job
// whose claim or terminal the restart refused is delivered again, and
// must not run out of deliveries for it.
func restartConfig(nc *nats.Conn) Config {
	cfg := testConfig(nc, restartName)
	cfg.AckWait, cfg.MaxDeliver = 2*time.Second, DefaultDeliver
	return cfg
}

// TestD1_ServerRestartMidRunLosesNoJobOrEvent: two worker processes
// play pair jobs (four at a time each) when the NATS server is shut
// down and started again on the same storage and port; two pairs are
// held in a tool call across the restart, and the others go on playing
// up to it. The workers reconnect; more jobs are submitted after. Then:
//
//   - every job submitted ends completed, with exactly one terminal
//     status ever written;
//   - every pair's timeline on the events stream runs from sequence 1
//     without a gap or an event stored twice, to one pair.completed;
//   - each holds, in place, every event the stream held of it just
//     before the server stopped.
func TestD1_ServerRestartMidRunLosesNoJobOrEvent(t *testing.T) {
	const before, after = 40, 20
	ctx := testCtx(t)
	dir := t.TempDir()
	s1, err := StartEmbedded(EmbeddedConfig{Dir: dir})
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s1.Shutdown()
			s1.WaitForShutdown()
		}
	})
	url, port := s1.ClientURL(), portOf(t, s1)
	nc, err := Connect(url, ConnectConfig{ReconnectWait: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	b, err := Open(ctx, restartConfig(nc))
	require.NoError(t, err)
	tm := watchTerminals(t, b)
	l := newLoopback(t, "")
	for _, tag := range []string{"A", "B"} {
		startPairWorker(t, url, restartName, "", l, "idempotent", envResume+"=fleet", envTag+"="+tag)
	}
	submit := func(from, n int) {
		for i := from; i < from+n; i++ {
			_, err := b.Submit(ctx, job.Job{ID: fmt.Sprintf("rs-%03d", i), Spec: []byte(fmt.Sprintf("Write line %d about the sea.", i))})
			require.NoError(t, err)
		}
	}
	submit(0, before)

	tm.waitJobs(t, ctx, 5)
	l.mu.Lock()
	l.gated = 2
	l.mu.Unlock()
	for range 2 {
		select {
		case <-l.frozen:
		case <-ctx.Done():
			t.Fatalf("no call held: %v", ctx.Err())
		}
	}
	// What the stream holds now was acknowledged as stored to the
	// worker that published it, or could have been.
	stored := streamTimelines(t, b)
	s1.Shutdown()
	s1.WaitForShutdown()
	stopped = true
	s2, err := StartEmbedded(EmbeddedConfig{Dir: dir, Port: port})
	require.NoError(t, err)
	t.Cleanup(func() { s2.Shutdown(); s2.WaitForShutdown() })
	awaitHealth(t, ctx, b, available)
	close(l.gate)
	submit(before, after)

	tm.waitJobs(t, ctx, before+after)
	tm.caughtUp(t, ctx)
	tm.mu.Lock()
	require.Len(t, tm.count, before+after)
	for jobID, n := range tm.count {
		require.Equal(t, 1, n, "job %s: terminal statuses", jobID)
	}
	tm.mu.Unlock()
	timelines := streamTimelines(t, b)
	require.Len(t, timelines, before+after)
	for i := range before + after {
		jobID := fmt.Sprintf("rs-%03d", i)
		st, err := b.Status(ctx, jobID)
		require.NoError(t, err)
		require.Equal(t, job.Completed, st.State, "job %s: %s: %s", jobID, st.Reason, st.Error)
		tl := timelines[jobID]
		require.NotNil(t, tl, "job %s: no timeline", jobID)
		require.Equal(t, 1, tl.terminals, "job %s", jobID)
		require.Equal(t, orchestrator.KindCompleted, tl.kinds[len(tl.kinds)-1], "job %s", jobID)
		if was := stored[jobID]; was != nil {
			require.GreaterOrEqual(t, len(tl.events), len(was.events), "job %s", jobID)
			require.Equal(t, was.events, tl.events[:len(was.events)], "job %s: events stored before the restart", jobID)
		}
	}
}

// TestD1_ABatchInFlightWhenTheServerStopsIsStoredOnce: a timeline batch
// is in flight when the NATS server stops, lost on its way to the
// server or stored with its ack lost on the way back. Once the server
// is started again on the same storage and port and the publisher has
// reconnected, the tool.started that sent it returns without an error,
// and the stream holds the batch exactly once, in place. A resumed
// pair's first batch, fenced on the subject's last message, is not
// taken for a moved timeline when the server had stored it.
func TestD1_ABatchInFlightWhenTheServerStopsIsStoredOnce(t *testing.T) {
	cases := []struct {
		name   string
		dir    int
		fenced bool
	}{{"lost", toServer, false}, {"ack lost", toClient, false}, {"fenced lost", toServer, true}, {"fenced ack lost", toClient, true}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := testCtx(t)
			store := t.TempDir()
			s1, err := StartEmbedded(EmbeddedConfig{Dir: store})
			require.NoError(t, err)
			port := portOf(t, s1)
			px := startProxy(t, s1.Addr().String())
			nc, err := Connect(px.url(), ConnectConfig{ReconnectWait: 20 * time.Millisecond})
			require.NoError(t, err)
			t.Cleanup(nc.Close)
			b, err := Open(ctx, testConfig(nc, "inflight"))
			require.NoError(t, err)
			const pairID = "pair-inflight"
			pub, err := b.Timeline(pairID, TimelineConfig{Batch: MaxBatch, Linger: time.Hour})
			require.NoError(t, err)
			evs := pairEvents(t, ctx, "model.delta", "model.delta", "tool.started", orchestrator.KindCompleted)
			require.NoError(t, pub.Observe(ctx, evs[0]))
			require.NoError(t, pub.Observe(ctx, evs[1]))
			batches := uint64(2)
			if c.fenced {
				// The first two events stored; a resumed pair goes on.
				require.NoError(t, pub.Flush(ctx))
				rec, err := b.stored(ctx, pairID)
				require.NoError(t, err)
				pub, err = b.Timeline(pairID, TimelineConfig{Batch: MaxBatch, Linger: time.Hour})
				require.NoError(t, err)
				pub.last, pub.fence, pub.fenced = rec.lastSeq, rec.streamSeq, true
				batches = 3
			}

			px.dropFrom(c.dir)
			done := make(chan error, 1)
			go func() { done <- pub.Observe(ctx, evs[2]) }()
			select {
			case <-px.dropped:
			case <-ctx.Done():
				t.Fatal("the batch was not sent")
			}
			s1.Shutdown()
			s1.WaitForShutdown()
			px.cut()
			s2, err := StartEmbedded(EmbeddedConfig{Dir: store, Port: port})
			require.NoError(t, err)
			t.Cleanup(func() { s2.Shutdown(); s2.WaitForShutdown() })
			px.restore(t)
			select {
			case err := <-done:
				require.NoError(t, err, "the tool.started in flight at the stop")
			case <-ctx.Done():
				t.Fatal("the tool.started in flight at the stop never returned")
			}
			require.NoError(t, pub.Observe(ctx, evs[3]))
			tl := streamTimelines(t, b)[pairID]
			require.NotNil(t, tl)
			require.Equal(t, []string{"model.delta", "model.delta", "tool.started", orchestrator.KindCompleted}, tl.kinds)
			info, err := b.events.Info(ctx)
			require.NoError(t, err)
			require.Equal(t, batches, info.State.Msgs, "each batch stored once")
		})
	}
}
