package store_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/store"
)

// An event whose caller stopped waiting (its ctx ended) while its commit
// was under way is still ahead of the next event of its log: the next
// event must not be committed, and acknowledged, before it. Were it, the
// store would hold event n+1 without event n, and a SIGKILL then would
// leave that gap.
func TestK16_ALaterEventNeverOvertakesAnUnansweredOneOfItsLog(t *testing.T) {
	t.Parallel() // its hooks are its store's (store.OpenWithHooks)
	ctx := context.Background()
	var queued atomic.Int32
	// Hold event 2's commit until event 3 is queued behind it.
	st, path, h := openHoldingCommit(t, 2, func(h *commitHold) {
		if queued.Add(1) == 3 {
			h.free()
		}
	})

	evs := runEvents(t, 3)
	e1, e2, e3 := evs[0], evs[1], evs[2]
	require.NoError(t, st.Observe(ctx, e1))

	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- st.Observe(cctx, e2) }()
	<-h.held
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled, "event 2 is not acknowledged")

	require.NoError(t, st.Observe(ctx, e3))
	seqs := recordedSeqs(t, path, "run-1")
	require.Equal(t, []int{1, 2, 3}, seqs, "event 3 was acknowledged only with event 2 before it")
}

// One log commits one event at a time, each in a transaction of its own,
// which rewrites more pages per event than a batch of many logs does: the
// writer's estimate of the WAL's growth must still be from above, so that
// it checkpoints before the WAL outgrows its bound.
func TestK17_CheckpointsBoundTheWALOfALoneLog(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	st := open(t, path)
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
	require.LessOrEqual(t, largest, int64(store.MaxWALBytes))
}
