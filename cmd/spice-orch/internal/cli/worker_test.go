package cli

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/serve"
	"github.com/spice-orch/spice-orch/jetstream"
	"github.com/spice-orch/spice-orch/job"
)

// TestD1_WorkerCommandPlaysJobsAndDrains: `worker --nats` plays pair jobs
// whose spec is a pair spec (here the scripted relay), records their
// terminal state, refuses a spec that names a workspace, and returns once
// its context ends.
func TestD1_WorkerCommandPlaysJobsAndDrains(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{Dir: dir + "/js"})
	require.NoError(t, err)
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	b, err := jetstream.Open(ctx, jetstream.Config{Conn: nc})
	require.NoError(t, err)

	wctx, stop := context.WithCancel(ctx)
	ready := make(chan struct{})
	done := make(chan error, 1)
	var out, errOut bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
	go func() {
		done <- runWorker(wctx, env, workerFlags{url: srv.ClientURL(), name: "spice", pairs: 2,
			store: dir + "/store.db", dataDir: dir + "/data", drain: 5 * time.Second}, func() { close(ready) })
	}()
	<-ready

	for i, id := range []string{"relay-1", "relay-2", "relay-3"} {
		_, err := b.Submit(ctx, job.Job{ID: id, Spec: []byte(serve.RelayYAML)})
		require.NoError(t, err, i)
	}
	_, err = b.Submit(ctx, job.Job{ID: "bad", Spec: []byte(serve.RelayYAML + "workspace: /tmp\n")})
	require.NoError(t, err)
	for _, id := range []string{"relay-1", "relay-2", "relay-3"} {
		st, err := b.Await(ctx, id)
		require.NoError(t, err)
		require.Equal(t, job.Completed, st.State, "%s: %s", id, st.Error)
	}
	st, err := b.Await(ctx, "bad")
	require.NoError(t, err)
	require.Equal(t, job.Failed, st.State)
	require.Equal(t, "spec_refused", st.Reason)

	stop()
	require.NoError(t, <-done)
	require.Contains(t, out.String(), "drained")
}
