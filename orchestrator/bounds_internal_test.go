package orchestrator

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/id"
)

// The timeline's minimum bounds are a run log's: the engine refuses a log
// below them and accepts one at them, and so does TimelineConfig.
func TestTimelineBoundsAreARunLogs(t *testing.T) {
	plans, err := enginetest.Plan("plan-1")
	require.NoError(t, err)
	engineAccepts := func(l engine.Limits) bool {
		_, err := engine.New(engine.Config{Provider: enginetest.NewProvider(), Plans: plans,
			IDs: &id.Counter{}, Clock: &enginetest.Clock{}, Limits: l})
		return err == nil
	}
	timelineAccepts := func(events, bytes int) bool {
		tc := TimelineConfig{MaxEvents: events, MaxBytes: bytes}
		return tc.normalize() == nil
	}
	for _, c := range []struct{ events, bytes int }{
		{minLogEvents, minLogBytes},
		{minLogEvents - 1, minLogBytes},
		{minLogEvents, minLogBytes - 1},
	} {
		require.Equal(t, engineAccepts(engine.Limits{MaxEvents: c.events, MaxBytes: c.bytes}), timelineAccepts(c.events, c.bytes),
			"events %d, bytes %d", c.events, c.bytes)
	}
	require.True(t, timelineAccepts(minLogEvents, minLogBytes))
}
