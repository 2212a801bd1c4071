package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/serve"
	"github.com/spice-orch/spice-orch/jetstream"
	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/orchestrator"
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

// TestD2_WorkerCommandResumesAPairItsStoreLacks: a job that another
// machine's worker had started (its status running, its attempt taken)
// is delivered to `worker --nats` with a store of its own, which does not
// hold the pair: the worker resumes it from the events stream, which
// holds nothing of it, so it plays the pair from its start, and the
// stream then holds the whole timeline to one terminal.
func TestD2_WorkerCommandResumesAPairItsStoreLacks(t *testing.T) {
	dir := t.TempDir()
	resumeElsewhere(t, workerFlags{store: dir + "/store.db", dataDir: dir + "/data"}, dir)
}

// TestD2_WorkerCommandWithoutAStoreResumesFromTheStream: `worker
// --no-store` records into no local store, and a job another machine's
// worker had started is resumed from the events stream alone, to one
// terminal.
func TestD2_WorkerCommandWithoutAStoreResumesFromTheStream(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	out := resumeElsewhere(t, workerFlags{noStore: true, dataDir: dir + "/data"}, home)
	require.Contains(t, out, "(no store)")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the worker made files beside its data dir")
	entries, err = os.ReadDir(home)
	require.NoError(t, err)
	require.Empty(t, entries, "the worker opened the default store")
}

// resumeElsewhere starts a worker with flags f (its URL, name and pairs
// set here) on a job that another machine's worker claimed as attempt 1
// and then left, and checks that the worker resumes it to completion
// with one terminal on the events stream. home is the worker's $HOME. It
// returns the worker's output.
func resumeElsewhere(t *testing.T, f workerFlags, home string) string {
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

	const jobID = "relay-elsewhere"
	_, err = b.Submit(ctx, job.Job{ID: jobID, Spec: []byte(serve.RelayYAML)})
	require.NoError(t, err)
	// Another machine's worker claimed it, then stopped answering.
	js, err := natsjs.New(nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, "spice_state")
	require.NoError(t, err)
	e, err := kv.Get(ctx, "s."+jobID)
	require.NoError(t, err)
	var st job.Status
	require.NoError(t, json.Unmarshal(e.Value(), &st))
	st.State, st.Attempt, st.Started = job.Running, 1, time.Now().UTC()
	v, err := json.Marshal(st)
	require.NoError(t, err)
	_, err = kv.Update(ctx, "s."+jobID, v, e.Revision())
	require.NoError(t, err)

	wctx, stop := context.WithCancel(ctx)
	ready := make(chan struct{})
	done := make(chan error, 1)
	var out, errOut bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}}
	f.url, f.name, f.pairs, f.drain = srv.ClientURL(), "spice", 1, 5*time.Second
	go func() { done <- runWorker(wctx, env, f, func() { close(ready) }) }()
	<-ready
	st, err = b.Await(ctx, jobID)
	require.NoError(t, err)
	require.Equal(t, job.Completed, st.State, "%s: %s", st.Reason, st.Error)
	terminals, last := 0, uint64(0)
	for e, err := range b.Events(ctx, jobID, 0, false) {
		require.NoError(t, err)
		require.Equal(t, last+1, e.Seq())
		last = e.Seq()
		if orchestrator.Terminal(e.Kind()) {
			terminals++
		}
	}
	require.Equal(t, 1, terminals)
	stop()
	require.NoError(t, <-done)
	return out.String()
}
