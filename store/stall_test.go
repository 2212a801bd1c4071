package store_test

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/store"
)

// A required observer blocks only within a bound (K17), and an observer
// returns when its context ends (eventlog.Observer). A commit that stalls
// (a slow fsync) must not keep Observe from returning: it answers "not
// acknowledged" when ctx ends, the commit goes on without it, and the
// event it held ends up recorded, in order, before the log's next event.
func TestK17_ObserveReturnsWhenItsContextEndsDuringAStalledCommit(t *testing.T) {
	ctx := context.Background()
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	var commits atomic.Int32
	clear := store.SetHooks(nil, func() {
		if commits.Add(1) == 1 { // the first commit stalls until released
			close(stalled)
			<-release
		}
	})
	path := dbPath(t)
	st, err := store.Open(ctx, path)
	require.NoError(t, err)
	errc := make(chan error, 1)
	t.Cleanup(func() {
		free()
		require.NoError(t, st.Close())
		clear()
	})

	rec := &eventRecorder{}
	l := newLog(t, "run-1", rec)
	for _, r := range []eventlog.Record{
		event.Record(t0, event.RunStarted{RunID: "run-1", PlanID: "plan-1", PlanFingerprint: "ab"}),
		event.Record(t0, event.TurnStarted{RunID: "run-1", TurnID: "turn-1", Index: 1}),
	} {
		_, err := l.Append(ctx, r)
		require.NoError(t, err)
	}
	e1, e2 := rec.events[0], rec.events[1]

	dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	go func() { errc <- st.Observe(dctx, e1) }()
	select {
	case <-stalled:
	case <-time.After(5 * time.Second):
		t.Fatal("event 1's commit never began")
	}
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.DeadlineExceeded, "event 1 is not acknowledged")
	case <-time.After(5 * time.Second):
		free()
		<-errc
		t.Fatal("Observe did not return within 5 s of its context's end while the commit stalled")
	}

	free()
	require.NoError(t, st.Observe(ctx, e2))
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT seq FROM events WHERE log = 'run-1' ORDER BY seq")
	require.NoError(t, err)
	defer rows.Close()
	var seqs []int
	for rows.Next() {
		var n int
		require.NoError(t, rows.Scan(&n))
		seqs = append(seqs, n)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int{1, 2}, seqs, "the stalled commit kept event 1, before event 2")
	require.Len(t, errc, 0, "event 1 was answered once")
}
