package jobworker

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/remotespec"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/serve"
	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// A worker's pair waits for its timeline as long as a NATS server takes
// to restart or a paused process to go on (here 8 s, past the kernel's
// default 5 s for an observer), well within the lease's AckWait, and
// then completes; it is not failed by the wait.
func TestD1_AWorkersPairWaitsOutABriefStallOfItsTimeline(t *testing.T) {
	workspaces := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		var once sync.Once
		stalled := eventlog.ObserverFunc(func(ctx context.Context, e eventlog.Event) error {
			var err error
			once.Do(func() {
				select {
				case <-time.After(8 * time.Second):
				case <-ctx.Done():
					err = ctx.Err()
				}
			})
			return err
		})
		bld := &remotespec.Builder{Getenv: func(string) string { return "" }}
		rep := playJob(t.Context(), bld, workspaces, job.Job{ID: "relay-1", Spec: []byte(serve.RelayYAML)}, stalled)
		require.Equal(t, job.Completed, rep.State, "%s: %s", rep.Reason, rep.Error)
	})
}
