package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/store"
)

// An event queued for the writer whose caller stopped waiting (its ctx
// ended) is still ahead of the next event of its log: the next event must
// not be committed, and acknowledged, on its caller's goroutine while the
// earlier one is held by the writer's goroutine. Were it, the store would
// hold event n+1 without event n, and a SIGKILL then would leave that gap.
func TestK16_ALaterEventNeverOvertakesAnUnansweredOneOfItsLog(t *testing.T) {
	ctx := context.Background()
	taken, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	var queuedN, takenN atomic.Int32
	clear := store.SetHooks(func() {
		if queuedN.Add(1) == 2 { // event 3 is queued behind event 2
			free()
		}
	}, func() {
		if takenN.Add(1) == 1 { // hold event 2 on the goroutine
			taken <- struct{}{}
			<-release
		}
	})
	path := dbPath(t)
	st, err := store.Open(ctx, path)
	require.NoError(t, err)
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
		event.Record(t0, event.TurnStarted{RunID: "run-1", TurnID: "turn-2", Index: 2}),
	} {
		_, err := l.Append(ctx, r)
		require.NoError(t, err)
	}
	e1, e2, e3 := rec.events[0], rec.events[1], rec.events[2]
	require.NoError(t, st.Observe(ctx, e1))

	// Another connection holds the write lock: event 2 cannot be committed
	// by its caller and goes to the goroutine, which the hook holds.
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	other, err := db.Conn(ctx)
	require.NoError(t, err)
	defer other.Close()
	_, err = other.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.NoError(t, err)

	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- st.Observe(cctx, e2) }()
	<-taken
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled, "event 2 is not acknowledged")
	_, err = other.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err)

	require.NoError(t, st.Observe(ctx, e3))
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
	require.Equal(t, []int{1, 2, 3}, seqs, "event 3 was acknowledged only with event 2 before it")
}

// The writer's connection waits for nobody's lock while it runs; Close
// gives it back to the pool waiting as the store was configured to, so
// that what Close still writes (its owner row's removal) waits for another
// process's lock instead of failing at once.
func TestRecoveryCloseLeavesTheWritersBusyTimeout(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenConfig(ctx, store.Config{Path: dbPath(t), BusyTimeout: 1500 * time.Millisecond})
	require.NoError(t, err)
	l := newLog(t, "run-1", st)
	_, err = l.Append(ctx, event.Record(t0, event.RunStarted{RunID: "run-1", PlanID: "plan-1", PlanFingerprint: "ab"}))
	require.NoError(t, err)
	ms, err := store.CloseReadingBusyTimeout(ctx, st)
	require.NoError(t, err)
	require.Equal(t, 1500, ms)
}

// Events that their callers commit themselves leave the checkpoint to the
// writer's goroutine. However late the goroutine runs it, the WAL stays
// within its bound: once a checkpoint is due, the next event waits for the
// goroutine, which checkpoints.
func TestK17_CheckpointsBoundTheWALOfALoneLogWhateverTheScheduling(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	var asked atomic.Int32
	clearCheckpoint := store.SetCheckpointHook(func() {
		if asked.Add(1) == 1 {
			<-release // the goroutine is late to its first checkpoint
		}
	})
	clearQueued := store.SetHooks(free, nil)
	path := dbPath(t)
	st, err := store.Open(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() {
		free()
		require.NoError(t, st.Close())
		clearCheckpoint()
		clearQueued()
	})
	l := newLog(t, "run-1", st)
	big := strings.Repeat("x", 60<<10)
	// About twice the WAL's bound in frames, one event at a time.
	var largest int64
	for i := range 2 * store.MaxWALBytes / len(big) {
		_, err := l.Append(ctx, event.Record(t0, event.ToolProgress{OperationID: "op-1", CallID: "c", Message: fmt.Sprint(i, big)}))
		require.NoError(t, err)
		fi, err := os.Stat(path + "-wal")
		require.NoError(t, err)
		largest = max(largest, fi.Size())
	}
	require.NotZero(t, asked.Load(), "a checkpoint fell due")
	require.LessOrEqual(t, largest, int64(store.MaxWALBytes))
}
