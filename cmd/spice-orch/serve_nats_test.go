//go:build unix

package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/jetstream"
	"github.com/spice-orch/spice-orch/store"
)

// startWorker starts a `worker --nats` child and waits until it fetches.
func startWorker(t *testing.T, ctx context.Context, url, db string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, "worker", "--nats", url, "--pairs", "2", "--store", db, "--drain", "5s")
	cmd.Env = env(t)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &syncBuffer{}
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "playing up to")
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return cmd
}

// streamLines reads a pair's SSE stream from after and returns the
// timeline events' data, then the end frame's.
func streamLines(t *testing.T, base, pairID string, after uint64) ([]string, string) {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/v1/pairs/"+pairID+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Last-Event-ID", strconv.FormatUint(after, 10))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var evs []string
	end := ""
	for _, f := range readFrames(resp.Body, 0, func() {}) {
		switch f.event {
		case "":
			evs = append(evs, f.data)
		case "end":
			end = f.data
		}
	}
	return evs, end
}

// TestS1_ServeStreamsAPairAWorkerPlaysInAnotherProcess: `serve --nats` in one
// process accepts a pair, a `worker --nats` in another plays it, and the
// pair's stream from serve — attached before the pair starts, and again
// from cursors after it ended — is its timeline gap-free and byte for
// byte as the worker recorded it, ending with its terminal and then end.
func TestS1_ServeStreamsAPairAWorkerPlaysInAnotherProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	ns, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{Dir: filepath.Join(dir, "js")})
	require.NoError(t, err)
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()

	c := startServe(t, ctx, "--nats", ns.ClientURL(), "--store", filepath.Join(dir, "serve.db"))
	pairID := c.post(t, scriptedReview)
	type result struct {
		evs []string
		end string
	}
	live := make(chan result, 1)
	go func() {
		evs, end := streamLines(t, c.url, pairID, 0)
		live <- result{evs, end}
	}()

	wdb := filepath.Join(dir, "worker.db")
	w := startWorker(t, ctx, ns.ClientURL(), wdb)
	got := <-live

	// The worker's own store has the same timeline.
	require.NoError(t, w.Process.Signal(syscall.SIGTERM))
	require.NoError(t, w.Wait())
	st, err := store.OpenConfig(context.Background(), store.Config{Path: wdb, ReadOnly: true})
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, st.ReplayJSON(context.Background(), &b, pairID))
	require.NoError(t, st.Close())
	want := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	timeline(t, b.String())
	require.Greater(t, len(want), 10)
	require.Equal(t, want, got.evs)
	require.Contains(t, got.end, `"state":"completed"`)

	for _, after := range []uint64{1, uint64(len(want) / 2), uint64(len(want) - 1), uint64(len(want))} {
		evs, end := streamLines(t, c.url, pairID, after)
		require.Equal(t, want[after:], append([]string{}, evs...), "after %d", after)
		require.Contains(t, end, `"state":"completed"`)
	}

	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	<-c.copied
	require.NoError(t, c.cmd.Wait(), c.stderr.String())
	for _, pid := range []int{w.Process.Pid, c.cmd.Process.Pid} {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH)
	}
}
