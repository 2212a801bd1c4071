package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/server"
)

// TestS3_FinishedPairsInMemoryAreBoundedByBytes: finished pairs stay in
// memory only while their feeds fit in RetainBytes, however many Retain
// allows; the ones let go stream from the store, byte for byte.
func TestS3_FinishedPairsInMemoryAreBoundedByBytes(t *testing.T) {
	const limit = 96 << 10
	h := newHarness(t, options{mutate: func(c *server.Config) { c.Retain, c.RetainBytes = 1000, limit }})
	big := strings.Repeat("x", 40<<10)
	var ids []string
	for range 6 {
		id := h.submit(testSpec{First: []string{big}, Second: []string{"fine"}})
		h.waitEnded(id)
		ids = append(ids, id)
	}
	for _, id := range ids {
		require.Equal(t, string(replay(t, h.st, id)), string(h.wait(id)), id)
	}
	pairs, bytes := h.srv.Retained()
	require.LessOrEqual(t, bytes, int64(limit))
	require.Less(t, pairs, len(ids), "some pairs were let go")
	require.Positive(t, pairs)
}

// TestS3_WorkspacesOfEndedPairsAreKeptForNPairs: with KeepWorkspaces 2,
// after five pairs only the newest two ended pairs' workspaces remain.
func TestS3_WorkspacesOfEndedPairsAreKeptForNPairs(t *testing.T) {
	h := newHarness(t, options{mutate: func(c *server.Config) { c.KeepWorkspaces = 2 }})
	var ids []string
	for range 5 {
		id := h.submit(testSpec{First: []string{"draft"}, Second: []string{"fine"}})
		h.streamEnd(t, id)
		ids = append(ids, id)
	}
	des, err := os.ReadDir(filepath.Join(h.data, "workspaces"))
	require.NoError(t, err)
	var kept []string
	for _, de := range des {
		kept = append(kept, de.Name())
	}
	require.ElementsMatch(t, ids[3:], kept)
}

// TestS3_WorkspacesOfEndedPairsAreKeptForADuration: with KeepWorkspaceAge
// an hour, a workspace last changed two hours ago goes when a pair ends.
func TestS3_WorkspacesOfEndedPairsAreKeptForADuration(t *testing.T) {
	h := newHarness(t, options{mutate: func(c *server.Config) { c.KeepWorkspaceAge = time.Hour }})
	stale := filepath.Join(h.data, "workspaces", "pair-20200101-000000-00000001")
	require.NoError(t, os.MkdirAll(stale, 0o700))
	two := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(stale, two, two))
	id := h.submit(testSpec{First: []string{"draft"}, Second: []string{"fine"}})
	h.streamEnd(t, id)
	require.NoDirExists(t, stale)
	require.DirExists(t, filepath.Join(h.data, "workspaces", id))
}

// TestS3_KeepWorkspacesIsBounded: a negative count or age is refused.
func TestS3_KeepWorkspacesIsBounded(t *testing.T) {
	for _, c := range []server.Config{{KeepWorkspaces: -1}, {KeepWorkspaces: server.MaxRetain + 1}, {KeepWorkspaceAge: -time.Second}} {
		c.Scheduler, c.Store, c.DataDir = nil, nil, ""
		_, err := server.New(c)
		require.Error(t, err)
	}
}

// streamEnd reads the pair's event stream to its end: the server has
// finished with the pair.
func (h *harness) streamEnd(t *testing.T, pairID string) {
	h.t.Helper()
	resp := h.openSSE(context.Background(), pairID, 0, false)
	defer resp.Body.Close()
	_, err := readSSE(t, resp.Body, func(e sseEvent) bool { return e.event == "end" })
	require.NoError(h.t, err)
}
