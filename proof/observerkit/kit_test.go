package observerkit

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// memory is an in-memory "durable" observer whose faults a test sets.
type memory struct {
	mu      sync.Mutex
	by      map[string][][]byte
	n       int
	gate    chan struct{} // while open (not closed), Observe blocks
	dropNth int           // acknowledge every dropNth event without recording it
	mangle  bool          // record other bytes than the event's
	refuse  bool          // storage refuses writes
	lie     bool          // ... but Observe says it wrote
	deaf    bool          // ignore the context while blocked
}

func newMemory() *memory { return &memory{by: make(map[string][][]byte)} }

func (m *memory) Observe(ctx context.Context, e eventlog.Event) error {
	if m.gate != nil {
		if m.deaf {
			<-m.gate
		} else {
			select {
			case <-m.gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refuse {
		if m.lie {
			return nil
		}
		return errors.New("memory: read-only")
	}
	m.n++
	if m.dropNth > 0 && m.n%m.dropNth == 0 {
		return nil
	}
	b := e.AppendJSON(nil)
	if m.mangle {
		b = bytes.ReplaceAll(b, []byte(`,"`), []byte(`, "`))
	}
	m.by[e.Log()] = append(m.by[e.Log()], b)
	return nil
}

func (m *memory) recorded(_ context.Context, log string) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]byte(nil), m.by[log]...), nil
}

func (m *memory) blocked() (*memory, func()) {
	m.gate = make(chan struct{})
	var once sync.Once
	return m, func() { once.Do(func() { close(m.gate) }) }
}

func fast() options { return Config{Prompt: 300 * time.Millisecond, Wait: 5 * time.Second}.options() }

func TestRunAgainstAConformingMemory(t *testing.T) {
	Run(t, Config{
		New: func(*testing.T) (eventlog.Observer, Recorded) { m := newMemory(); return m, m.recorded },
		Blocked: func(*testing.T) (eventlog.Observer, Recorded, func()) {
			m, release := newMemory().blocked()
			return m, m.recorded, release
		},
		Refusing: func(*testing.T) eventlog.Observer { m := newMemory(); m.refuse = true; return m },
		Prompt:   fast().prompt,
	})
}

func requireCaught(t *testing.T, err error, want string) {
	t.Helper()
	require.Error(t, err, "the kit must catch this observer")
	require.Contains(t, err.Error(), want)
}

func TestKitCatchesAnAcknowledgedEventNotRecorded(t *testing.T) {
	m := newMemory()
	m.dropNth = 5
	requireCaught(t, checkOrdering(m, m.recorded, fast()), "K16: log kit-log-")
	requireCaught(t, checkTwoLogs(m, m.recorded, fast()), "K16:")
}

func TestKitCatchesOtherBytesThanAcknowledged(t *testing.T) {
	m := newMemory()
	m.mangle = true
	requireCaught(t, checkOrdering(m, m.recorded, fast()), "is not the acknowledged one")
}

func TestKitCatchesAnObserverDeafToItsContext(t *testing.T) {
	m, release := newMemory().blocked()
	m.deaf = true
	defer release()
	requireCaught(t, checkBackpressure(m, m.recorded, func() {}, fast()), "K17: the observer did not return within")
	requireCaught(t, checkDeadline(m, fast()), "K26: a blocked observer did not give up within")
}

func TestKitCatchesALyingObserver(t *testing.T) {
	m := newMemory()
	m.refuse, m.lie = true, true
	requireCaught(t, checkRefusing(m, fast()), "K26: an observer whose storage refuses writes acknowledged")
}

func TestKitContainsPanics(t *testing.T) {
	p := eventlog.ObserverFunc(func(context.Context, eventlog.Event) error { panic("boom") })
	requireCaught(t, checkOrdering(p, func(context.Context, string) ([][]byte, error) { return nil, nil }, fast()), "refused event 1")
}
