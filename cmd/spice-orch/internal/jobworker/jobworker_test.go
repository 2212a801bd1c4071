package jobworker

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/serve"
	"github.com/spice-orch/spice-orch/jetstream"
	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Run plays the jobs it fetches, records each pair in its store, refuses
// a spec that names a workspace as it would over HTTP, and returns once
// its context ends.
func TestD1_RunPlaysJobsAndRefusesAnUntrustedSpec(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{Dir: filepath.Join(dir, "js")})
	require.NoError(t, err)
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	b, err := jetstream.Open(ctx, jetstream.Config{Conn: nc, Name: "spice"})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data", "workspaces"), 0o700))
	st, err := store.Open(ctx, filepath.Join(dir, "runs.db"))
	require.NoError(t, err)
	defer st.Close()

	wctx, stop := context.WithCancel(ctx)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(wctx, Config{URL: srv.ClientURL(), Name: "spice", Pairs: 2, Drain: 5 * time.Second,
			Store: st, StorePath: "runs.db", DataDir: filepath.Join(dir, "data"),
			Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }, Ready: func() { close(ready) }})
	}()
	<-ready

	_, err = b.Submit(ctx, job.Job{ID: "relay-1", Spec: []byte(serve.RelayYAML)})
	require.NoError(t, err)
	_, err = b.Submit(ctx, job.Job{ID: "bad", Spec: []byte(serve.RelayYAML + "workspace: /tmp\n")})
	require.NoError(t, err)
	js, err := b.Await(ctx, "relay-1")
	require.NoError(t, err)
	require.Equal(t, job.Completed, js.State, js.Error)
	js, err = b.Await(ctx, "bad")
	require.NoError(t, err)
	require.Equal(t, job.Failed, js.State)
	require.Equal(t, "spec_refused", js.Reason)

	stop()
	require.NoError(t, <-done)
	p, err := st.Pair(ctx, "relay-1")
	require.NoError(t, err)
	require.False(t, p.Summary.Ended.IsZero(), "the pair ended in the worker's store")
}
