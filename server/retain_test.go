package server_test

import (
	"strings"
	"testing"

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
