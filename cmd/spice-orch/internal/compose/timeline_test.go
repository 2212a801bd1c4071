package compose_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/compose"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// lines records the canonical lines of the pair timeline's events it is
// told of; as a store, it refuses the at-th event it is told of (of any
// log, counting from 1).
type lines struct {
	pair string
	at   int

	mu  sync.Mutex
	n   int
	out bytes.Buffer
}

func (l *lines) Observe(_ context.Context, e eventlog.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if l.n == l.at {
		return errors.New("refused")
	}
	if e.Log() == l.pair {
		l.out.Write(e.AppendJSON(nil))
		l.out.WriteByte('\n')
	}
	return nil
}

func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.String()
}

// A Timeline observer is told of an event, relayed or the pair's own, only
// after the store acknowledged that same event: with a
// store that refuses the event at every index in turn, what the observer
// saw is exactly what the store kept of the timeline.
func TestK16_TimelineObserversAreToldOnlyWhatTheStoreAcknowledged(t *testing.T) {
	build := func(st *lines, tl *lines) *compose.Pair {
		p, err := compose.Build(compose.Options{Spec: spec.Builtin(), Workspace: t.TempDir(), PairID: "pair-1",
			Store: st, Timeline: []eventlog.Observer{tl}})
		require.NoError(t, err)
		return p
	}
	all := &lines{pair: "pair-1"}
	p := build(all, &lines{pair: "pair-1"})
	_, _, err := run(t, p)
	require.NoError(t, err)
	total := all.n
	require.Greater(t, total, 90)
	// The store is told of the timeline only: each run event reaches it
	// once, relayed.
	require.Equal(t, total, strings.Count(all.text(), "\n"))
	for at := 1; at <= total; at++ {
		st, tl := &lines{pair: "pair-1", at: at}, &lines{pair: "pair-1"}
		pair, err := orchestrator.Start(context.Background(), build(st, tl).Config)
		require.NoError(t, err)
		_, _ = pair.Wait(context.Background())
		require.Equal(t, st.text(), tl.text(), "refused at %d", at)
	}
}
