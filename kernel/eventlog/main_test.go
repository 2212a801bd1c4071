package eventlog_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// note is a test payload written with Object, the way payload authors do.
type note struct {
	N    int64
	Text string
	Flag bool
}

func (p note) fields(o *eventlog.Object) {
	o.Int("n", p.N)
	o.OptionalString("text", p.Text)
	o.Bool("flag", p.Flag)
}

func (p note) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}

func (p note) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 890, time.UTC)

func rec(n int64) eventlog.Record {
	return eventlog.Record{Kind: "test.note", Time: t0, Payload: note{N: n}}
}

func terminal(n int64) eventlog.Record {
	r := rec(n)
	r.Kind, r.Terminal = "test.done", true
	return r
}

func newLog(t testing.TB, cfg eventlog.Config) *eventlog.Log {
	t.Helper()
	if cfg.MaxEvents == 0 {
		cfg.MaxEvents = 1 << 16
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 64 << 20
	}
	l, err := eventlog.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

func appendN(t testing.TB, l *eventlog.Log, n int) {
	t.Helper()
	for i := range n {
		_, err := l.Append(context.Background(), rec(int64(i)))
		require.NoError(t, err)
	}
}

// retained returns the sequences a fresh subscription at the lowest cursor
// replays, without waiting for more.
func retained(t testing.TB, l *eventlog.Log) []uint64 {
	t.Helper()
	st := l.Stats()
	s, err := l.Subscribe(context.Background(), st.FirstSeq-1)
	require.NoError(t, err)
	defer s.Close()
	var seqs []uint64
	for range st.RetainedEvents {
		e, err := s.Next(context.Background())
		require.NoError(t, err)
		seqs = append(seqs, e.Seq())
	}
	return seqs
}

func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}
