package store_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/store"
)

// BenchmarkStoreObserver measures durable events per second: each
// iteration is one event appended to a log whose required observer is the
// store, so it returns only after the event's commit synced the WAL
// (synchronous=FULL, checked below). "sequential" is one log, one event per
// commit; "concurrent" is 8 logs appending at once, sharing commits.
func BenchmarkStoreObserver(b *testing.B) {
	ctx := context.Background()
	b.Run("sequential", func(b *testing.B) {
		st := open(b, dbPath(b))
		requireFull(b, st)
		l := newLog(b, "run-bench", st)
		p := event.ToolProgress{OperationID: "op-1", CallID: "call-1", Message: "step"}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.Append(ctx, event.Record(t0, p)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("concurrent", func(b *testing.B) {
		st := open(b, dbPath(b))
		requireFull(b, st)
		var n atomic.Int64
		b.SetParallelism(4) // 4×GOMAXPROCS logs
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			l := newLog(b, fmt.Sprintf("run-%d", n.Add(1)), st)
			p := event.ToolProgress{OperationID: "op-1", CallID: "call-1", Message: "step"}
			for pb.Next() {
				if _, err := l.Append(ctx, event.Record(t0, p)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

func requireFull(b *testing.B, st *store.Store) {
	d, err := st.Durability(context.Background())
	require.NoError(b, err)
	require.Equal(b, store.Durability{JournalMode: "wal", Synchronous: "FULL"}, d)
}
