package remotespec

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// TestD3_ServePacesBetweenOperationsNotInside: serve's pacer holds a pair
// after the events that end or lie between operations, and never after an
// event that leaves a model operation or a tool call open, so the
// operation's span and gen_ai.client.operation.duration measure the
// operation, not the pacing.
func TestD3_ServePacesBetweenOperationsNotInside(t *testing.T) {
	raw, err := eventlog.NewRaw([]byte(`{}`))
	require.NoError(t, err)
	const pace = time.Hour
	synctest.Test(t, func(t *testing.T) {
		l, err := eventlog.New(eventlog.Config{MaxEvents: 64, MaxBytes: 1 << 20})
		require.NoError(t, err)
		held := func(kind string) time.Duration {
			e, err := l.Append(context.Background(), eventlog.Record{Kind: kind, Time: time.Unix(0, 0), Payload: raw})
			require.NoError(t, err)
			start := time.Now()
			require.NoError(t, pacer(pace).Observe(context.Background(), e))
			return time.Since(start)
		}
		for _, kind := range []string{event.KindModelStarted, event.KindModelTextDelta, event.KindToolStarted, event.KindToolProgress} {
			require.Zero(t, held(kind), kind)
		}
		for _, kind := range []string{event.KindRunStarted, event.KindTurnStarted, event.KindModelCompleted,
			event.KindModelFailed, event.KindToolCompleted, event.KindTurnCompleted, "pair.handoff"} {
			require.Equal(t, pace, held(kind), kind)
		}
	})
}
