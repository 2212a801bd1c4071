package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/server"
)

// TestM5_ServerQuestionsAreA204WithoutASource: a server whose host asks
// no question of its own (serve without --mcp) answers the list of the
// server's questions with 204 No Content, behind the token, so that the
// page stops asking; one whose host does lists them.
func TestM5_ServerQuestionsAreA204WithoutASource(t *testing.T) {
	const path = "/v1/pairs/" + server.OwnQuestions + "/approvals"
	bearer := []string{"Authorization", "Bearer tok"}
	approvals, err := orchestrator.NewApprovals(orchestrator.ApprovalsConfig{})
	require.NoError(t, err)

	none := newHarness(t, options{token: "tok", mutate: func(c *server.Config) { c.Approvals = approvals }})
	require.Equal(t, http.StatusUnauthorized, none.do("GET", path, "", "").status)
	r := none.do("GET", path, "", "", bearer...)
	require.Equal(t, http.StatusNoContent, r.status, string(r.body))
	require.Empty(t, r.body)

	some := newHarness(t, options{token: "tok", mutate: func(c *server.Config) {
		c.Approvals, c.ServerQuestions = approvals, true
	}})
	r = some.do("GET", path, "", "", bearer...)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.JSONEq(t, `{"approvals":[]}`, string(r.body))

	// The questions go through the broker: without one there is none.
	h := newHarness(t, options{})
	_, err = server.New(server.Config{Scheduler: h.sched, Store: h.st, Build: h.build, DataDir: t.TempDir(), ServerQuestions: true})
	require.ErrorIs(t, err, bound.ErrInvalid)
	require.ErrorContains(t, err, "server.server_questions")
}
