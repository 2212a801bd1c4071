package plan_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/plan"
)

// A second Release while the first one is inside its callback does not
// run the callback again; it waits for the first one's outcome, or gives
// up on its own context without changing it. The 32-goroutine test
// rarely hits this window; this one always does.
func TestK14_ReleaseWhileTheFirstIsInsideItsCallback(t *testing.T) {
	for _, inline := range []bool{false, true} {
		name := "goroutine"
		if inline {
			name = "inline"
		}
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			entered, hold := make(chan struct{}), make(chan struct{})
			l, err := plan.NewLease(newPlan(t, "plan-1", baseConfigs()), func() error {
				if calls.Add(1) == 1 {
					close(entered)
					<-hold
				}
				return nil
			}, plan.LeaseConfig{Inline: inline, ReleaseTimeout: time.Minute})
			require.NoError(t, err)

			first := make(chan error, 1)
			go func() { first <- l.Release(context.Background()) }()
			<-entered

			// The second call cannot be answered while the first is held:
			// it gives up on its own context.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			err = l.Release(ctx)
			cancel()
			var re *plan.ReleaseError
			require.ErrorAs(t, err, &re, "a later caller's own timeout")
			require.Equal(t, int32(1), calls.Load(), "the callback ran once")

			// Another later caller waits, and gets the first one's outcome.
			second := make(chan error, 1)
			go func() { second <- l.Release(context.Background()) }()
			close(hold)
			require.NoError(t, <-first)
			require.NoError(t, <-second)
			require.NoError(t, l.Release(context.Background()))
			require.Equal(t, int32(1), calls.Load())
		})
	}
}
