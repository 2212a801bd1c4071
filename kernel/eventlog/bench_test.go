package eventlog_test

import (
	"context"
	"io"
	"sync"
	"testing"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// BenchmarkEventAppend appends to a log with no observers and no
// subscribers. The payload is boxed into the Record each time, as a caller
// would; the log itself adds nothing once its ring has grown.
func BenchmarkEventAppend(b *testing.B) {
	l := newLog(b, eventlog.Config{MaxEvents: 4096, MaxBytes: 1 << 20})
	ctx := context.Background()
	b.ReportAllocs()
	n := int64(0)
	for b.Loop() {
		n++
		if _, err := l.Append(ctx, eventlog.Record{Kind: "test.note", Time: t0, Payload: note{N: n, Text: "hello"}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEventSubscribeFanout appends while 8 subscribers read every
// event. Every 256 events the appender waits until all subscribers have read
// that far, so the measured cost includes delivery to all of them.
func BenchmarkEventSubscribeFanout(b *testing.B) {
	const subscribers, batch = 8, 256
	l := newLog(b, eventlog.Config{MaxEvents: 4 * batch, MaxBytes: 8 << 20})
	ctx := context.Background()
	acks := make(chan struct{}, subscribers)
	var wg sync.WaitGroup
	for range subscribers {
		s, err := l.Subscribe(ctx, 0)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			for {
				e, err := s.Next(ctx)
				if err == io.EOF {
					return
				}
				if err != nil {
					b.Error(err)
					return
				}
				if e.Seq()%batch == 0 {
					acks <- struct{}{}
				}
			}
		})
	}
	b.ReportAllocs()
	n := int64(0)
	for b.Loop() {
		n++
		e, err := l.Append(ctx, eventlog.Record{Kind: "test.note", Time: t0, Payload: note{N: n, Text: "hello"}})
		if err != nil {
			b.Fatal(err)
		}
		if e.Seq()%batch == 0 {
			for range subscribers {
				<-acks
			}
		}
	}
	if err := l.Close(ctx); err != nil {
		b.Fatal(err)
	}
	wg.Wait()
}

// BenchmarkEventLogLifecycle is what one short run costs the log: New,
// eight appends, Close.
func BenchmarkEventLogLifecycle(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := eventlog.New(eventlog.Config{MaxEvents: 4096, MaxBytes: 1 << 20, ReserveEvents: 16})
		if err != nil {
			b.Fatal(err)
		}
		for i := range 8 {
			if _, err := l.Append(ctx, eventlog.Record{Kind: "test.note", Time: t0, Payload: note{N: int64(i)}}); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
