package server_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/server"
)

// openHealth opens GET /v1/health as an event stream and returns the
// response once its headers are in, the stream's slot taken.
func (h *harness) openHealth(ctx context.Context) *http.Response {
	h.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", h.url("/v1/health"), nil)
	require.NoError(h.t, err)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := h.http.Client().Do(req)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestS3_HealthStreamsHaveTheirOwnBound: every open page holds a health
// stream; they are bounded apart from the pairs' streams, so idle pages
// take no slot a pair's stream needs, and past their own bound a health
// stream is a 503 too_many_streams. The bound itself is bounded.
func TestS3_HealthStreamsHaveTheirOwnBound(t *testing.T) {
	h := newHarness(t, options{mutate: func(c *server.Config) { c.MaxStreams, c.MaxHealthStreams = 1, 3 }})
	pairID := h.submit(testSpec{First: []string{"a"}, Second: []string{"b"}, Hold: 2})
	<-h.holdOf(pairID).reached
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 3 {
		r := h.openHealth(ctx)
		require.Equal(t, http.StatusOK, r.StatusCode)
		require.Equal(t, "text/event-stream", r.Header.Get("Content-Type"))
	}
	over := h.openHealth(ctx)
	require.Equal(t, http.StatusServiceUnavailable, over.StatusCode)
	require.Equal(t, "1", over.Header.Get("Retry-After"))
	b, err := io.ReadAll(over.Body)
	require.NoError(t, err)
	require.Contains(t, string(b), `"code":"too_many_streams"`)

	// The pair's one slot is still free.
	s := h.openSSE(ctx, pairID, 0, false)
	defer s.Body.Close()
	close(h.holdOf(pairID).release)
	evs, err := readSSE(t, s.Body, nil)
	require.NoError(t, err)
	require.Equal(t, "end", evs[len(evs)-1].event)

	_, err = server.New(server.Config{Scheduler: h.sched, Store: h.st, Build: h.build, DataDir: t.TempDir(), MaxHealthStreams: server.MaxStreams + 1})
	require.ErrorContains(t, err, "server.max_health_streams")
}

// TestS3_NegativeBoundsAreRefused: a negative count is refused by New
// with an error naming it, never taken for no bound nor a panic.
func TestS3_NegativeBoundsAreRefused(t *testing.T) {
	h := newHarness(t, options{})
	for field, edit := range map[string]func(*server.Config){
		"server.max_streams":        func(c *server.Config) { c.MaxStreams = -1 },
		"server.max_health_streams": func(c *server.Config) { c.MaxHealthStreams = -1 },
		"server.stream_lag":         func(c *server.Config) { c.StreamLag = -1 },
		"server.retain":             func(c *server.Config) { c.Retain = -1 },
		"server.keep_workspaces":    func(c *server.Config) { c.KeepWorkspaces = -1 },
	} {
		c := server.Config{Scheduler: h.sched, Store: h.st, Build: h.build, DataDir: t.TempDir()}
		edit(&c)
		_, err := server.New(c)
		require.ErrorContains(t, err, field)
	}
}
