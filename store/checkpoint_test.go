package store_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/store"
)

// TestK17_CheckpointsBoundTheWAL writes, from 64 logs at once, about
// twice as many WAL frames as the checkpoint threshold, and checks after
// every round that the WAL file never outgrew its bound: the writer's
// checkpoints keep it bounded under sustained load, and every event is
// still recorded.
func TestK17_CheckpointsBoundTheWAL(t *testing.T) {
	const logs = 64
	// An event commits at least two frames: its log's index leaf and most
	// of a table leaf.
	const rounds = store.CheckpointFrames / logs
	path := dbPath(t)
	st := open(t, path)
	ls := make([]*eventlog.Log, logs)
	for i := range ls {
		ls[i] = newLog(t, fmt.Sprintf("run-%d", i), st)
	}
	ctx := context.Background()
	p := event.ToolProgress{OperationID: "op-1", CallID: "call-1", Message: strings.Repeat("s", 700)}
	largest := int64(0)
	for range rounds {
		var wg sync.WaitGroup
		errs := make([]error, logs)
		for i, l := range ls {
			wg.Go(func() { _, errs[i] = l.Append(ctx, event.Record(t0, p)) })
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		fi, err := os.Stat(path + "-wal")
		require.NoError(t, err)
		largest = max(largest, fi.Size())
	}
	t.Logf("largest WAL: %d bytes (bound %d) after %d events", largest, store.MaxWALBytes, logs*rounds)
	require.LessOrEqual(t, largest, int64(store.MaxWALBytes))
	for i := range ls {
		require.Equal(t, rounds, bytes.Count(replay(t, st, fmt.Sprintf("run-%d", i)), []byte("\n")))
	}
}
