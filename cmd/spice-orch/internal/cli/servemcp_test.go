//go:build unix

package cli

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/mcp/servers"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/server"
	"github.com/spice-orch/spice-orch/toolgen"
)

// mcpServer is a serve whose pairs share the fixture MCP server (--mcp).
type mcpServer struct {
	url, db   string
	events    chan servers.Event
	questions chan orchestrator.Approval
}

func startMCPServer(t *testing.T, approve string) *mcpServer {
	t.Helper()
	return startMCPServerWith(t, approve, growSpec(t))
}

// startMCPServerWith is startMCPServer with the servers of mcpSpec.
func startMCPServerWith(t *testing.T, approve, mcpSpec string) *mcpServer {
	t.Helper()
	dir := t.TempDir()
	specPath := filepath.Join(dir, "mcp.yaml")
	require.NoError(t, os.WriteFile(specPath, []byte(mcpSpec), 0o600))
	ms := &mcpServer{db: filepath.Join(dir, "runs.db"), events: make(chan servers.Event, 64), questions: make(chan orchestrator.Approval, 16)}
	hooks := serveHooks{question: func(a orchestrator.Approval) { ms.questions <- a },
		mcpEvent: func(e servers.Event) { ms.events <- e }}
	f := serveFlags{addr: "127.0.0.1:0", store: ms.db, dataDir: filepath.Join(dir, "data"),
		pairs: 4, queue: 16, maxConns: 64, approve: approve, mcp: specPath}
	ms.url = startServe(t, Env{Stdout: &strings.Builder{}, Stderr: &strings.Builder{}, Getenv: func(string) string { return "" }}, f, hooks)
	ms.next(t, toolgen.EventActivated) // the first plan
	return ms
}

func (ms *mcpServer) next(t *testing.T, kind toolgen.EventKind) servers.Event {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second) // a bound on a wait, not a sleep
	defer timeout.Stop()
	for {
		select {
		case e := <-ms.events:
			if e.Kind == kind {
				return e
			}
		case <-timeout.C:
			t.Fatalf("no %s event", kind)
		}
	}
}

func (ms *mcpServer) question(t *testing.T) orchestrator.Approval {
	t.Helper()
	select {
	case a := <-ms.questions:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("no approval question")
	}
	return orchestrator.Approval{}
}

// callsSpec is a relay whose writer calls tool with args, then answers.
func callsSpec(tool, args string) string {
	return `version: 1
pattern: relay
approve: never
workers:
  - role: writer
    provider: scripted
    script:
      - calls: [{name: ` + tool + `, arguments: ` + args + `}]
      - text: done
  - role: reviewer
    provider: scripted
    script:
      - text: fine
`
}

// playPair posts spec and returns the pair's whole timeline once it ended.
func (ms *mcpServer) playPair(t *testing.T, spec string) string {
	t.Helper()
	_, timeline := ms.play(t, spec)
	return timeline
}

// play is playPair that returns the pair's ID too.
func (ms *mcpServer) play(t *testing.T, spec string) (string, string) {
	t.Helper()
	status, body := post(t, ms.url, "application/yaml", spec)
	require.Equal(t, http.StatusCreated, status, body)
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	status, body = httpDo(t, "GET", ms.url+"/v1/pairs/"+created.ID+"/events.jsonl", "", "")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"kind":"pair.completed"`)
	return created.ID, body
}

// plansOf returns the plan of pair.started and those of its run.started.
func plansOf(t *testing.T, timeline string) (string, []string) {
	t.Helper()
	var pairPlan string
	var runs []string
	for _, line := range strings.Split(strings.TrimSpace(timeline), "\n") {
		var ev struct {
			Kind    string
			Payload struct {
				PlanID  string `json:"plan_id"`
				Payload struct {
					PlanID string `json:"plan_id"`
				}
			}
		}
		require.NoError(t, json.Unmarshal([]byte(line), &ev))
		switch ev.Kind {
		case "pair.started":
			pairPlan = ev.Payload.PlanID
		case "run.started":
			runs = append(runs, ev.Payload.Payload.PlanID)
		}
	}
	return pairPlan, runs
}

func TestM5_ServeListChangedReachesOnlyPairsBuiltAfterIt(t *testing.T) {
	ms := startMCPServer(t, "never")
	status, body := post(t, ms.url, "application/yaml", callsSpec("extra", "{}"))
	require.Equal(t, http.StatusBadRequest, status, "extra is not listed yet: %s", body)

	first := ms.playPair(t, callsSpec("grow", "{}"))
	ms.next(t, toolgen.EventActivated)
	firstPlan, runs := plansOf(t, first)
	for _, p := range runs {
		require.Equal(t, firstPlan, p, "the pair that grew the list kept its plan")
	}

	second := ms.playPair(t, callsSpec("extra", "{}"))
	require.Contains(t, second, `"name":"extra"`)
	require.Equal(t, 1, strings.Count(second, `"kind":"tool.completed"`))
	secondPlan, _ := plansOf(t, second)
	require.NotEqual(t, firstPlan, secondPlan)

	// A spec sent over HTTP may not name MCP servers of its own.
	status, body = post(t, ms.url, "application/yaml", growSpec(t))
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "mcp_servers")
}

func TestM5_ServeCandidateWithChangedDefinitionsWaitsForTheOperator(t *testing.T) {
	ms := startMCPServer(t, "mutating")
	ms.playPair(t, callsSpec("grow", "{}"))
	q := ms.question(t)
	require.Equal(t, server.OwnQuestions, q.Pair)
	require.Equal(t, "fixture", q.Tool)
	require.Contains(t, string(q.Arguments), `"extra"`)

	// Pending: the candidate is not active, new pairs get the old tools.
	status, body := post(t, ms.url, "application/yaml", callsSpec("extra", "{}"))
	require.Equal(t, http.StatusBadRequest, status, "the candidate waits: %s", body)
	status, body = httpDo(t, "GET", ms.url+"/v1/pairs/"+server.OwnQuestions+"/approvals", "", "")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, q.Digest)

	// Denied: it stays inactive and the old generation serves.
	answer := ms.url + "/v1/pairs/" + server.OwnQuestions + "/approvals/" + string(q.Question)
	status, body = httpDo(t, "POST", answer, "application/json", answerJSON("deny", q.Digest))
	require.Equal(t, http.StatusOK, status, body)
	failed := ms.next(t, toolgen.EventCandidateFailed)
	require.Contains(t, failed.Reason, "not approved")
	status, _ = post(t, ms.url, "application/yaml", callsSpec("extra", "{}"))
	require.Equal(t, http.StatusBadRequest, status, "a denied candidate stays inactive")
	ms.playPair(t, callsSpec("echo", `{text: old generation}`))

	// The list changes again: approved, it serves the pairs after it.
	ms.playPair(t, callsSpec("grow", "{}"))
	q = ms.question(t)
	status, body = httpDo(t, "POST", ms.url+"/v1/pairs/"+server.OwnQuestions+"/approvals/"+string(q.Question),
		"application/json", answerJSON("approve", q.Digest))
	require.Equal(t, http.StatusOK, status, body)
	ms.next(t, toolgen.EventActivated)
	got := ms.playPair(t, callsSpec("extra", "{}"))
	require.Contains(t, got, `"name":"extra"`)
}
