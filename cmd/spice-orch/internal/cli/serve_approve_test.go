//go:build unix

package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/orchestrator"
)

// approvalSpec is a relay whose writer writes out.txt once and then
// answers; fs.write is mutating, so serve's default policy asks first.
const approvalSpec = `version: 1
pattern: relay
workers:
  - role: writer
    provider: scripted
    script:
      - calls: [{name: fs.write, arguments: {path: out.txt, content: approved}}]
      - text: written
  - role: reviewer
    provider: scripted
    script:
      - text: fine
`

// approvalServer is a serve with the default approval policy whose
// pending questions arrive on questions.
type approvalServer struct {
	url, dir  string
	questions chan orchestrator.Approval
}

// startServe runs serve with f and hooks (its ready hook is its own)
// until the test ends, and returns its URL once it listens.
func startServe(t *testing.T, env Env, f serveFlags, hooks serveHooks) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	hooks.ready = func(url string) { ready <- url }
	go func() { done <- runServe(ctx, env, f, hooks) }()
	var url string
	select {
	case url = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("serve ended before it listened: %v", err)
	case <-time.After(time.Minute):
		cancel()
		t.Fatal("serve did not listen within a minute")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Error("serve did not stop within a minute")
		}
	})
	return url
}

func startApprovalServer(t *testing.T) *approvalServer {
	t.Helper()
	dir := t.TempDir()
	as := &approvalServer{dir: dir, questions: make(chan orchestrator.Approval, 16)}
	hooks := serveHooks{question: func(a orchestrator.Approval) { as.questions <- a }}
	f := serveFlags{addr: "127.0.0.1:0", store: filepath.Join(dir, "runs.db"), dataDir: filepath.Join(dir, "data"),
		pairs: 4, queue: 16, maxConns: 64}
	as.url = startServe(t, Env{Stdout: &strings.Builder{}, Stderr: &strings.Builder{}, Getenv: func(string) string { return "" }}, f, hooks)
	return as
}

func (as *approvalServer) question(t *testing.T) orchestrator.Approval {
	t.Helper()
	select {
	case a := <-as.questions:
		return a
	case <-time.After(time.Minute):
		t.Fatal("no approval question within a minute")
	}
	return orchestrator.Approval{}
}

func httpDo(t *testing.T, method, url, ctype, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func answerJSON(answer, digest string) string {
	b, _ := json.Marshal(map[string]string{"answer": answer, "digest": digest})
	return string(b)
}

// TestR1_ServeAsksBeforeAMutatingCall: under serve's default policy a
// spec's fs.write waits; the API lists the question with the worker, the
// tool, its effect and replay class, its arguments and digest; an answer
// with another digest or to an unknown question answers nothing (409,
// 404) and the file is not written; the right digest approves it, the
// tool runs once, and the question and its answer are in the timeline.
func TestR1_ServeAsksBeforeAMutatingCall(t *testing.T) {
	as := startApprovalServer(t)
	status, body := post(t, as.url, "application/yaml", approvalSpec)
	require.Equal(t, http.StatusCreated, status, body)
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	q := as.question(t)
	require.Equal(t, created.ID, q.Pair)

	status, body = httpDo(t, "GET", as.url+"/v1/pairs/"+created.ID+"/approvals", "", "")
	require.Equal(t, http.StatusOK, status, body)
	var list struct {
		Approvals []struct {
			Question, Worker, Run, Call, Tool, Effect, Replay, Digest string
			Arguments                                                 json.RawMessage
		}
	}
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list.Approvals, 1, body)
	got := list.Approvals[0]
	require.Equal(t, string(q.Question), got.Question)
	require.Equal(t, "writer", got.Worker)
	require.Equal(t, "fs.write", got.Tool)
	require.Equal(t, "mutating", got.Effect)
	require.Equal(t, "idempotent", got.Replay)
	require.JSONEq(t, `{"path":"out.txt","content":"approved"}`, string(got.Arguments))
	require.Equal(t, q.Digest, got.Digest)
	require.Equal(t, string(q.Call), got.Call)

	var pair struct {
		State   string
		Waiting int
	}
	status, body = httpDo(t, "GET", as.url+"/v1/pairs/"+created.ID, "", "")
	require.Equal(t, http.StatusOK, status)
	require.NoError(t, json.Unmarshal([]byte(body), &pair))
	require.Equal(t, 1, pair.Waiting, "the pair shows it waits: %s", body)

	answer := as.url + "/v1/pairs/" + created.ID + "/approvals/" + got.Question
	out := filepath.Join(as.dir, "data", "workspaces", created.ID, "out.txt")
	other := strings.Repeat("0", 64)
	status, body = httpDo(t, "POST", answer, "application/json", answerJSON("approve", other))
	require.Equal(t, http.StatusConflict, status, body)
	require.Contains(t, body, `"code":"digest_mismatch"`)
	status, body = httpDo(t, "POST", as.url+"/v1/pairs/"+created.ID+"/approvals/no-such-question", "application/json", answerJSON("approve", got.Digest))
	require.Equal(t, http.StatusNotFound, status, body)
	require.Contains(t, body, `"code":"unknown_question"`)
	status, body = httpDo(t, "POST", as.url+"/v1/pairs/other-pair/approvals/"+got.Question, "application/json", answerJSON("approve", got.Digest))
	require.Equal(t, http.StatusNotFound, status, body, "a question answers only under its own pair")
	status, _ = httpDo(t, "POST", answer, "application/json", `{"answer":"approve","digest":"`+got.Digest+`","extra":1}`)
	require.Equal(t, http.StatusBadRequest, status)
	require.NoFileExists(t, out, "nothing ran before the answer")
	status, body = httpDo(t, "GET", as.url+"/v1/pairs/"+created.ID+"/approvals", "", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, got.Digest, "a refused answer left the question pending")

	status, body = httpDo(t, "POST", answer, "application/json", answerJSON("approve", got.Digest))
	require.Equal(t, http.StatusOK, status, body)
	status, body = httpDo(t, "GET", as.url+"/v1/pairs/"+created.ID+"/events.jsonl", "", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `"kind":"pair.completed"`)
	require.Contains(t, body, `"kind":"interaction.started"`)
	require.Contains(t, body, `"kind":"interaction.answered"`)
	require.Equal(t, 1, strings.Count(body, `"kind":"tool.completed"`), "the tool ran once")
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, "approved", string(b))
	status, _ = httpDo(t, "POST", answer, "application/json", answerJSON("approve", got.Digest))
	require.Equal(t, http.StatusNotFound, status, "an answered question is gone")
	status, body = httpDo(t, "GET", as.url+"/v1/pairs/"+created.ID, "", "")
	require.Equal(t, http.StatusOK, status)
	require.NoError(t, json.Unmarshal([]byte(body), &pair))
	require.Zero(t, pair.Waiting, body)
}

// TestR1_ServeDenialNeverRuns: a denied call never touches the file
// system, and the model sees approval_denied.
func TestR1_ServeDenialNeverRuns(t *testing.T) {
	as := startApprovalServer(t)
	status, body := post(t, as.url, "application/yaml", approvalSpec)
	require.Equal(t, http.StatusCreated, status, body)
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	q := as.question(t)
	status, body = httpDo(t, "POST", as.url+"/v1/pairs/"+created.ID+"/approvals/"+string(q.Question), "application/json", answerJSON("deny", q.Digest))
	require.Equal(t, http.StatusOK, status, body)
	_, body = httpDo(t, "GET", as.url+"/v1/pairs/"+created.ID+"/events.jsonl", "", "")
	require.Contains(t, body, `"kind":"pair.completed"`)
	require.Contains(t, body, orchestrator.CodeApprovalDenied)
	require.NoFileExists(t, filepath.Join(as.dir, "data", "workspaces", created.ID, "out.txt"))
}
