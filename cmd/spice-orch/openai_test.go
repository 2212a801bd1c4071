package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

const testKey = "sk-test-SECRET-123"

// chatServer is a local OpenAI-compatible server for
// examples/openai-pair.yaml. It answers each streaming chat request from
// what the request holds: the worker (by its system prompt) and whether the
// last message is the input or a tool result.
type chatServer struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	requests []chatRequest
}

type chatRequest struct {
	Path, Auth string
	Model      string `json:"model"`
	Stream     bool   `json:"stream"`
	Messages   []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	file string
}

func newChatServer(t *testing.T) *chatServer {
	s := &chatServer{t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *chatServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) < 2 {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	req.Path, req.Auth = r.URL.Path, r.Header.Get("Authorization")
	worker := "reviewer"
	if bytes.Contains(req.Messages[0].Content, []byte("You write what the task asks")) {
		worker = "executor"
	}
	step := map[string]string{
		"executor/user": "executor_write.http", "executor/tool": "executor_answer.http",
		"reviewer/user": "reviewer_read.http", "reviewer/tool": "reviewer_approve.http",
	}
	req.file = step[worker+"/"+req.Messages[len(req.Messages)-1].Role]
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	if req.file == "" {
		http.Error(w, `{"error":{"message":"unexpected conversation","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	raw, err := os.ReadFile(filepath.Join("testdata", req.file))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	stream, _ := io.ReadAll(res.Body)
	for k, v := range res.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(res.StatusCode)
	// One server-sent event at a time, as a server streams them.
	f, _ := w.(http.Flusher)
	for len(stream) > 0 {
		n := bytes.Index(stream, []byte("\n\n")) + 2
		if n < 2 {
			n = len(stream)
		}
		if _, err := w.Write(stream[:n]); err != nil {
			return
		}
		if f != nil {
			f.Flush()
		}
		stream = stream[n:]
	}
}

func (s *chatServer) seen() []chatRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]chatRequest(nil), s.requests...)
}

// The OpenAI example pair runs end to end from the command line against a
// local server that OPENAI_BASE_URL points at; the key reaches the server
// and nothing else.
func TestOpenAIPairRunsEndToEndAgainstALocalServer(t *testing.T) {
	t.Parallel()
	srv := newChatServer(t)
	e := env(t, "OPENAI_BASE_URL="+srv.srv.URL+"/v1", "OPENAI_API_KEY="+testKey)
	ws := t.TempDir()
	db := filepath.Join(t.TempDir(), "runs.db")
	r := spiceOrch(t, e, "run", "../../examples/openai-pair.yaml", "--json", "--workspace", ws, "--store", db)
	require.Equal(t, 0, r.code, r.stderr)

	ls := timeline(t, r.stdout)
	last := ls[len(ls)-1]
	require.Equal(t, "pair.completed", last.Kind)
	require.Equal(t, "approved", field[string](t, last.Payload, "reason"))
	require.Equal(t, 1, field[int](t, last.Payload, "rounds"))
	require.Equal(t, int64(212+330+190+280), field[int64](t, last.Payload, "input_tokens"))
	var calls []string
	for _, l := range ls {
		if l.Kind == "tool.completed" {
			calls = append(calls, l.Relay.Worker+":"+field[string](t, l.Relay.Payload, "name"))
			require.Empty(t, field[map[string]string](t, l.Relay.Payload, "problem"))
		}
	}
	require.Equal(t, []string{"executor:fs.write", "reviewer:fs.read"}, calls)

	readme, err := os.ReadFile(filepath.Join(ws, "README.md"))
	require.NoError(t, err)
	require.Equal(t, "# durparse\n\ndurparse turns strings like \"1h30m\" into time.Duration values, with errors that say which unit was wrong.\n", string(readme))

	reqs := srv.seen()
	require.Len(t, reqs, 4)
	for _, q := range reqs {
		require.Equal(t, "/v1/chat/completions", q.Path)
		require.Equal(t, "Bearer "+testKey, q.Auth)
		require.Equal(t, "gpt-4o-mini", q.Model)
		require.True(t, q.Stream)
		var tools []string
		for _, tl := range q.Tools {
			tools = append(tools, tl.Function.Name)
		}
		require.Equal(t, []string{"fs_read", "fs_write", "text_stats"}, tools)
	}
	require.Equal(t, []string{"executor_write.http", "executor_answer.http", "reviewer_read.http", "reviewer_approve.http"},
		[]string{reqs[0].file, reqs[1].file, reqs[2].file, reqs[3].file})

	replay := spiceOrch(t, e, "runs", "replay", field[string](t, ls[0].Payload, "pair_id"), "--json", "--store", db)
	require.Equal(t, 0, replay.code, replay.stderr)
	require.Equal(t, r.stdout, replay.stdout)
	for _, out := range []string{r.stdout, r.stderr, replay.stdout} {
		require.NotContains(t, out, "SECRET")
	}
	store, err := os.ReadFile(db)
	require.NoError(t, err)
	require.False(t, bytes.Contains(store, []byte("SECRET")), "the key is not recorded")

	readable := spiceOrch(t, e, "run", "../../examples/openai-pair.yaml", "--no-store", "--workspace", ws)
	require.Equal(t, 0, readable.code, readable.stderr)
	require.Contains(t, readable.stdout, "[executor] tool fs.write (mutating)")
	require.Contains(t, readable.stdout, "[reviewer] | APPROVED")
	require.Contains(t, readable.stdout, "pair completed: approved")
}

// Without a key and without a server of its own, an openai worker is a
// configuration mistake: exit 2 before anything runs.
func TestOpenAIPairWithoutKeyExitsTwo(t *testing.T) {
	t.Parallel()
	r := spiceOrch(t, env(t), "run", "../../examples/openai-pair.yaml", "--no-store")
	require.Equal(t, 2, r.code)
	require.Equal(t, "spice-orch: workers[0]: provider openai needs OPENAI_API_KEY (or a base_url / OPENAI_BASE_URL for a server without keys)\n", r.stderr)
	require.Empty(t, r.stdout, "no pair started")
}
