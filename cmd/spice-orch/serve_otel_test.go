//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// TestD3_ServeOTelSendsEachPairAndFlushesWhenItStops runs the binary's
// `serve --otel` against a real OTLP/HTTP receiver on loopback, configured
// only by the OTEL_* environment: a pair posted with a traceparent is
// drawn in the caller's trace, /metrics shows it, and on SIGTERM serve
// flushes its batched spans before it exits 0.
func TestD3_ServeOTelSendsEachPairAndFlushesWhenItStops(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--otel", "--addr", "127.0.0.1:0", "--demo=false", "--pace", "0",
		"--store", filepath.Join(dir, "runs.db"))
	// A long batch delay: the spans reach the receiver only by the flush
	// at shutdown.
	cmd.Env = env(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+c.srv.URL, "OTEL_BSP_SCHEDULE_DELAY=600000")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	br := bufio.NewReader(out)
	first, err := br.ReadString('\n')
	require.NoError(t, err, stderr.String())
	copied := make(chan struct{})
	go func() { defer close(copied); _, _ = io.Copy(io.Discard, br) }()
	f := strings.Fields(first)
	require.GreaterOrEqual(t, len(f), 3, first)
	url := f[2]
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), first)

	const traceID, spanID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	req, err := http.NewRequest("POST", url+"/v1/pairs", strings.NewReader("version: 1\npattern: review\napprove: never\n"+
		"workers:\n  - role: writer\n    provider: scripted\n  - role: reviewer\n    provider: scripted\n"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/yaml")
	req.Header.Set("traceparent", "00-"+traceID+"-"+spanID+"-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	loc := resp.Header.Get("Location")
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp, err = http.Get(url + loc + "/events.jsonl")
	require.NoError(t, err)
	events, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(events), `"kind":"pair.`)

	resp, err = http.Get(url + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(metrics), "spice_orch_scheduler_queue_depth")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	<-copied // stdout closes as serve exits; Wait comes after the reads
	require.NoError(t, cmd.Wait(), stderr.String())
	require.Empty(t, stderr.String())
	spans := c.take()
	require.NotEmpty(t, spans)
	var roots int
	for _, s := range spans {
		require.Equal(t, traceID, hex.EncodeToString(s.TraceId), s.Name)
		if strings.HasPrefix(s.Name, "invoke_workflow ") {
			roots++
			require.Equal(t, spanID, hex.EncodeToString(s.ParentSpanId))
		}
	}
	require.Equal(t, 1, roots)

	// Exported again from the store, without --provider: the same spans,
	// in the caller's trace, below the caller's span.
	pairID := strings.TrimPrefix(loc, "/v1/pairs/")
	x := spiceOrch(t, env(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+c.srv.URL), "runs", "export-trace", pairID,
		"--store", filepath.Join(dir, "runs.db"))
	require.Equal(t, 0, x.code, x.stderr)
	replayed := c.take()
	require.Len(t, replayed, len(spans))
	for i := range spans {
		require.True(t, proto.Equal(withoutLiveOnly(spans[i]), replayed[i]), "span %s differs", spans[i].Name)
	}
}

// syncBuffer is a child's stderr that the test may read while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
