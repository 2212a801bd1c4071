package store_test

import (
	"context"
	"database/sql"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/store"
)

// A required observer blocks only within a bound (K17), and an observer
// returns when its context ends (eventlog.Observer). A commit that stalls
// (a slow fsync) must not keep Observe from returning: it answers "not
// acknowledged" when ctx ends, the commit goes on without it, and the
// event it held ends up recorded, in order, before the log's next event.
func TestK17_ObserveReturnsWhenItsContextEndsDuringAStalledCommit(t *testing.T) {
	t.Parallel() // its hooks are its store's (store.OpenWithHooks)
	ctx := context.Background()
	st, path, h := openHoldingCommit(t, 1, nil) // the first commit stalls until freed
	errc := make(chan error, 1)

	evs := runEvents(t, 2)
	e1, e2 := evs[0], evs[1]

	dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	go func() { errc <- st.Observe(dctx, e1) }()
	select {
	case <-h.held:
	case <-time.After(5 * time.Second):
		t.Fatal("event 1's commit never began")
	}
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.DeadlineExceeded, "event 1 is not acknowledged")
	case <-time.After(5 * time.Second):
		h.free()
		<-errc
		t.Fatal("Observe did not return within 5 s of its context's end while the commit stalled")
	}

	h.free()
	require.NoError(t, st.Observe(ctx, e2))
	seqs := recordedSeqs(t, path, "run-1")
	require.Equal(t, []int{1, 2}, seqs, "the stalled commit kept event 1, before event 2")
	require.Len(t, errc, 0, "event 1 was answered once")
}

// A store's test hooks fire for that store's events only, so tests that
// hold or count commits can run in parallel with each other.
func TestHooksFireOnlyForTheirStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type counts struct{ queued, commits atomic.Int32 }
	openCounting := func(c *counts) *store.Store {
		st, err := store.OpenWithHooks(ctx, dbPath(t), store.Hooks{
			Queued: func() { c.queued.Add(1) },
			Commit: func() { c.commits.Add(1) },
		})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, st.Close()) })
		return st
	}
	var a, b counts
	stA, stB := openCounting(&a), openCounting(&b)
	plain := open(t, dbPath(t))

	evs := runEvents(t, 2)
	// Each Observe waits for its commit: one event, one transaction.
	require.NoError(t, stA.Observe(ctx, evs[0]))
	for _, e := range evs {
		require.NoError(t, stB.Observe(ctx, e))
		require.NoError(t, plain.Observe(ctx, e))
	}
	require.Equal(t, [2]int32{1, 1}, [2]int32{a.queued.Load(), a.commits.Load()}, "store A's hooks saw A's one event")
	require.Equal(t, [2]int32{2, 2}, [2]int32{b.queued.Load(), b.commits.Load()}, "store B's hooks saw B's two events")
}

// commitHold holds the store's commit number n, once it begins, until
// free is called (or the test ends).
type commitHold struct {
	n       int32
	commits atomic.Int32
	held    chan struct{} // closed when commit n begins
	release chan struct{}
	once    sync.Once
}

func (h *commitHold) free() { h.once.Do(func() { close(h.release) }) }

// openHoldingCommit opens a store at a new path whose commit n waits until
// h.free; queued, if not nil, runs each time an event is queued for the
// writer.
func openHoldingCommit(t *testing.T, n int32, queued func(h *commitHold)) (*store.Store, string, *commitHold) {
	t.Helper()
	h := &commitHold{n: n, held: make(chan struct{}), release: make(chan struct{})}
	var onQueued func()
	if queued != nil {
		onQueued = func() { queued(h) }
	}
	path := dbPath(t)
	st, err := store.OpenWithHooks(context.Background(), path, store.Hooks{Queued: onQueued, Commit: func() {
		if h.commits.Add(1) == h.n {
			close(h.held)
			<-h.release
		}
	}})
	require.NoError(t, err)
	t.Cleanup(func() {
		h.free()
		require.NoError(t, st.Close())
	})
	return st, path, h
}

// recordedSeqs reads, from the file at path, the sequences recorded for
// log, in order.
func recordedSeqs(t *testing.T, path, log string) []int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.QueryContext(context.Background(), "SELECT seq FROM events WHERE log = ? ORDER BY seq", log)
	require.NoError(t, err)
	defer rows.Close()
	var seqs []int
	for rows.Next() {
		var n int
		require.NoError(t, rows.Scan(&n))
		seqs = append(seqs, n)
	}
	require.NoError(t, rows.Err())
	return seqs
}

// runEvents returns run-1's first n events (its start, then turns), from
// a log of their own, for tests that hand them to a store themselves.
func runEvents(t *testing.T, n int) []eventlog.Event {
	t.Helper()
	rec := &eventRecorder{}
	l := newLog(t, "run-1", rec)
	for i := range n {
		r := event.Record(t0, event.RunStarted{RunID: "run-1", PlanID: "plan-1", PlanFingerprint: "ab"})
		if i > 0 {
			r = event.Record(t0, event.TurnStarted{RunID: "run-1", TurnID: id.Turn("turn-" + strconv.Itoa(i)), Index: i})
		}
		_, err := l.Append(context.Background(), r)
		require.NoError(t, err)
	}
	return rec.events
}
