package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/server"
)

// devState is a host's PluginDev: the state it was last told.
type devState server.PluginDevState

func (d devState) PluginDevState() server.PluginDevState { return server.PluginDevState(d) }

// GET /v1/plugin-dev serves the host's state behind the API's token, with
// its diagnostics bounded, and is a 204 on a server without one.
func TestL3_ThePluginDevStateIsServedBounded(t *testing.T) {
	none := newHarness(t, options{}).do("GET", "/v1/plugin-dev", "", "")
	require.Equal(t, http.StatusNoContent, none.status)
	require.Empty(t, none.body)

	diags := []string{"main.go:12: undefined: <b>x</b>", strings.Repeat("y", 5000)}
	for range 100 {
		diags = append(diags, "more")
	}
	h := newHarness(t, options{token: "tok", mutate: func(c *server.Config) {
		c.PluginDev = devState{Plugin: "wordcount", Active: "wordcount-g1", ActiveSHA256: strings.Repeat("a", 64),
			Failed: &server.PluginDevFailure{Candidate: "wordcount-c2", Stage: "build", Diagnostics: diags}}
	}})
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/v1/plugin-dev", "", "").status)
	r := h.do("GET", "/v1/plugin-dev", "", "", "Authorization", "Bearer tok")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var got server.PluginDevState
	require.NoError(t, json.Unmarshal(r.body, &got))
	require.Equal(t, "wordcount-g1", got.Active)
	require.Equal(t, "wordcount-c2", got.Failed.Candidate)
	require.Len(t, got.Failed.Diagnostics, 50)
	require.Equal(t, diags[0], got.Failed.Diagnostics[0])
	require.Len(t, got.Failed.Diagnostics[1], 1024+len("…"))
	require.Len(t, diags, 102, "the host's slice is untouched")
}
