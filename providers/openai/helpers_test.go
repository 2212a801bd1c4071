package openai_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/providers/openai"
)

const testKey = "sk-test-SECRET-123"

// replay is an httptest server that answers the n-th request with the
// n-th handler (the last one repeats) and records every request.
type replay struct {
	srv      *httptest.Server
	mu       sync.Mutex
	handlers []http.HandlerFunc
	requests []recorded
}

type recorded struct {
	path   string
	header http.Header
	body   []byte
}

func newReplay(t *testing.T, handlers ...http.HandlerFunc) *replay {
	t.Helper()
	r := &replay{handlers: handlers}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *replay) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	n := len(r.requests)
	r.requests = append(r.requests, recorded{path: req.URL.Path, header: req.Header.Clone(), body: body})
	h := r.handlers[min(n, len(r.handlers)-1)]
	r.mu.Unlock()
	h(w, req)
}

func (r *replay) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}

func (r *replay) request(i int) recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[i]
}

// sleeps records the waits the provider asks for, without waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// provider returns a provider aimed at r, with recorded sleeps; edit
// adjusts the config.
func (r *replay) provider(t *testing.T, edit ...func(*openai.Config)) (*openai.Provider, *sleeps) {
	t.Helper()
	sl := &sleeps{}
	cfg := openai.Config{
		APIKey:     testKey,
		BaseURL:    r.srv.URL + "/v1",
		HTTPClient: r.srv.Client(),
		Sleep:      sl.sleep,
	}
	for _, e := range edit {
		e(&cfg)
	}
	p, err := openai.New(cfg)
	require.NoError(t, err)
	return p, sl
}

// transcript serves testdata/name: its status and headers, then its body
// one server-sent event at a time.
func transcript(t *testing.T, name string) http.HandlerFunc {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return respond(res.StatusCode, res.Header, body, false)
}

// slowTranscript serves testdata/name and then holds the stream open until
// the client goes away.
func slowTranscript(t *testing.T, name string) http.HandlerFunc {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return respond(res.StatusCode, res.Header, body, true)
}

// sseBody serves a stream made of the given event data lines.
func sseBody(events ...string) http.HandlerFunc {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	h := http.Header{"Content-Type": {"text/event-stream"}}
	return respond(http.StatusOK, h, []byte(b.String()), false)
}

func respond(status int, header http.Header, body []byte, hold bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			if k != "Content-Length" && k != "Transfer-Encoding" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(status)
		f, _ := w.(http.Flusher)
		if status != http.StatusOK {
			_, _ = w.Write(body)
			return
		}
		// Each request streams its own view of body: a handler serves
		// every retry, possibly at the same time.
		rest := body
		for len(rest) > 0 {
			n := bytes.Index(rest, []byte("\n\n"))
			if n < 0 {
				n = len(rest)
			} else {
				n += 2
			}
			if _, err := w.Write(rest[:n]); err != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
			rest = rest[n:]
		}
		if hold {
			<-r.Context().Done()
		}
	}
}

// resetConnection drops the connection without answering.
func resetConnection(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// holdBeforeHeaders sends nothing until the client goes away.
func holdBeforeHeaders(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// request is a kernel request with a history that exercises every role,
// a tool result with a problem, and a tool whose name has a dot.
func request(t testing.TB) model.Request {
	t.Helper()
	weather := must(tool.NewDefinition(tool.DefinitionConfig{
		Name: "get_weather", Description: "Current weather for a location.",
		Schema: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`),
		Effect: tool.ReadOnly, Replay: tool.Safe,
	}))
	read := must(tool.NewDefinition(tool.DefinitionConfig{
		Name: "fs.read", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		Effect: tool.ReadOnly, Replay: tool.Safe, Capabilities: []tool.Capability{tool.FilesystemRead},
	}))
	call1 := must(tool.NewCall("call_a", "fs.read", []byte(`{"path":"a.txt"}`)))
	call2 := must(tool.NewCall("call_b", "get_weather", []byte(`{"location":"Oslo"}`)))
	res1 := must(tool.NewResult("call_a", "contents of a"))
	res2 := must(tool.NewProblemResult("call_b", problem.Must("not_found", "no such city"), "try another"))
	msgs := []message.Message{
		must(message.User("What is in a.txt, and the weather in Oslo?")),
		must(message.Assistant("Checking.", call1, call2)),
		must(message.Results(res1, res2)),
		must(message.Assistant("a.txt says 'contents of a'.")),
		must(message.User("Thanks. And Paris?")),
	}
	return must(model.NewRequest(model.RequestConfig{
		Operation: "op-1", Model: "gpt-4o-mini", System: "You are terse.",
		Messages: msgs, Tools: []tool.Definition{weather, read},
	}))
}

// drain reads s to its end, holding it to the kernel contract with an
// Assembler, and returns the items and the error that ended it (nil for
// io.EOF after a terminal item).
func drain(t *testing.T, s model.Stream) ([]model.Item, error) {
	t.Helper()
	var asm model.Assembler
	var items []model.Item
	for range 100000 {
		it, err := s.Recv()
		if err == io.EOF {
			require.NoError(t, asm.End())
			_, again := s.Recv()
			require.ErrorIs(t, again, io.EOF, "io.EOF must repeat")
			require.NoError(t, s.Close())
			return items, nil
		}
		if err != nil {
			require.NoError(t, s.Close())
			return items, err
		}
		require.NoError(t, asm.Add(it), "item %d breaks the stream contract", len(items))
		items = append(items, it)
	}
	t.Fatal("the stream did not end")
	return nil, nil
}

func text(s string) model.Item { return must(model.TextDelta(s)) }

func call(callID, name, args string) model.Item {
	return must(model.ToolCall(must(tool.NewCall(id.Call(callID), name, []byte(args)))))
}

func completed(in, out int64, md string) model.Item {
	var m model.Metadata
	if md != "" {
		m = must(model.NewMetadata("openai", []byte(md)))
	}
	return model.Completed(must(model.NewUsage(in, out)), m)
}

func failed(code, msg string) model.Item { return must(model.Failed(problem.Must(code, msg))) }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// providerError asserts err is a *model.ProviderError and returns it.
func providerError(t *testing.T, err error) *model.ProviderError {
	t.Helper()
	var pe *model.ProviderError
	require.True(t, errors.As(err, &pe), "want *model.ProviderError, got %T: %v", err, err)
	return pe
}
