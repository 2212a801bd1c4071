package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestS1_APairFromTheStoreAloneKeepsItsTotals: after a restart the pair
// resource is read from the store alone, and its reason, rounds, runs and
// usage are those the live server showed, read from the recorded
// terminal.
func TestS1_APairFromTheStoreAloneKeepsItsTotals(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, options{storePath: dir + "/runs.db"})
	pairID := h.submit(reviewSpec)
	h.wait(pairID)
	type view struct {
		State  string          `json:"state"`
		Reason string          `json:"reason"`
		Rounds int             `json:"rounds"`
		Runs   int             `json:"runs"`
		Usage  json.RawMessage `json:"usage"`
	}
	get := func(h *harness) view {
		r := h.do("GET", "/v1/pairs/"+pairID, "", "")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var v view
		require.NoError(t, json.Unmarshal(r.body, &v))
		return v
	}
	live := get(h)
	require.Equal(t, "approved", live.Reason)
	require.Equal(t, 2, live.Rounds)
	require.Equal(t, 4, live.Runs)
	h.close()
	require.Equal(t, live, get(newHarness(t, options{storePath: dir + "/runs.db"})))
}
