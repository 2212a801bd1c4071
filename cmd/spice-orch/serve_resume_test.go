//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// approvalJSON is one pending question as GET /v1/pairs/{id}/approvals
// lists it.
type approvalJSON struct {
	Question, Worker, Run, Call, Tool, Digest string
	Arguments                                 json.RawMessage
}

func (c *serveChild) approvals(t *testing.T, pairID string) []approvalJSON {
	t.Helper()
	resp, err := http.Get(c.url + "/v1/pairs/" + pairID + "/approvals")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var v struct{ Approvals []approvalJSON }
	require.NoError(t, json.Unmarshal(b, &v))
	return v.Approvals
}

// postJSON posts body and returns the status and the response body.
func (c *serveChild) postJSON(t *testing.T, path, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(c.url+path, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// eventStream reads a pair's SSE stream line by line.
type eventStream struct {
	body io.Closer
	sc   *bufio.Scanner
}

func (c *serveChild) events(t *testing.T, ctx context.Context, pairID string) *eventStream {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", c.url+"/v1/pairs/"+pairID+"/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8<<20)
	t.Cleanup(func() { resp.Body.Close() })
	return &eventStream{body: resp.Body, sc: sc}
}

// until reads data lines until one holds each of the strings, in order,
// and returns the lines read.
func (s *eventStream) until(t *testing.T, wants ...string) []string {
	t.Helper()
	var seen []string
	for _, want := range wants {
		for {
			require.True(t, s.sc.Scan(), "the stream ended before %q", want)
			l := s.sc.Text()
			if !strings.HasPrefix(l, "data: ") {
				continue
			}
			seen = append(seen, l)
			if strings.Contains(l, want) {
				break
			}
		}
	}
	return seen
}

// TestR2_ServeSIGKILLedWithAQuestionPendingAsksItAgain: serve is
// SIGKILLed while a pair's fs.write waits for its approval. The next
// serve on the same store and data directory resumes the pair and lists
// the same question (call, tool, arguments, digest); the answer continues
// the run: the model is not asked again for the operation that made the
// call (the model server counts requests), and the tool runs once, after
// the answer.
func TestR2_ServeSIGKILLedWithAQuestionPendingAsksItAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model := newChatServer(t)
	args := []string{"--allow-openai", "--store", filepath.Join(dir, "runs.db"), "--data-dir", filepath.Join(dir, "data")}
	spec, err := os.ReadFile(filepath.Join("..", "..", "examples", "openai-pair.yaml"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	e := env(t, "OPENAI_BASE_URL="+model.srv.URL+"/v1", "OPENAI_API_KEY="+testKey)

	first := startServeEnv(t, ctx, e, args...)
	pairID := first.post(t, string(spec))
	first.events(t, ctx, pairID).until(t, `"interaction.started"`)
	asked := first.approvals(t, pairID)
	require.Len(t, asked, 1)
	require.Equal(t, "fs.write", asked[0].Tool)
	require.Len(t, model.seen(), 1, "the one request that made the call")
	require.NoError(t, first.cmd.Process.Kill())
	_ = first.cmd.Wait()
	<-first.copied
	ws := filepath.Join(dir, "data", "workspaces", pairID)
	require.NoFileExists(t, filepath.Join(ws, "README.md"), "nothing ran before the answer")

	second := startServeEnv(t, ctx, e, args...)
	defer func() {
		_ = second.cmd.Process.Kill()
		_ = second.cmd.Wait()
	}()
	stream := second.events(t, ctx, pairID)
	stream.until(t, `"pair.resumed"`, `"interaction.started"`)
	again := second.approvals(t, pairID)
	require.Len(t, again, 1, "the same question, listed as waiting")
	require.Equal(t, asked[0].Digest, again[0].Digest, "the same call: the same digest")
	require.Equal(t, asked[0].Call, again[0].Call)
	require.Equal(t, asked[0].Run, again[0].Run)
	require.JSONEq(t, string(asked[0].Arguments), string(again[0].Arguments))
	require.NoFileExists(t, filepath.Join(ws, "README.md"), "the tool waits for the answer")

	status, body := second.postJSON(t, "/v1/pairs/"+pairID+"/approvals/"+again[0].Question,
		`{"answer":"approve","digest":"`+again[0].Digest+`"}`)
	require.Equal(t, http.StatusOK, status, body)
	rest := stream.until(t, `"pair.completed"`)

	writes := 0
	for _, req := range model.seen() {
		if req.file == "executor_write.http" {
			writes++
		}
	}
	require.Equal(t, 1, writes, "the operation that made the call is asked once in all: %v", model.seen())
	ran := 0
	for _, l := range rest {
		if strings.Contains(l, `"tool.completed"`) && strings.Contains(l, `fs.write`) {
			ran++
		}
	}
	require.Equal(t, 1, ran, "the tool ran once")
	b, err := os.ReadFile(filepath.Join(ws, "README.md"))
	require.NoError(t, err)
	var a struct{ Content string }
	require.NoError(t, json.Unmarshal(again[0].Arguments, &a))
	require.Equal(t, a.Content, string(b))
}
