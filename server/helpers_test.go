package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/server"
	"github.com/spice-orch/spice-orch/store"
	"github.com/spice-orch/spice-orch/workers"
)

// testSpec is the tiny spec the test BuildFunc understands: two scripted
// workers and their answers, each answer cut into Deltas text deltas.
type testSpec struct {
	Pattern   string   `json:"pattern"` // "relay" (default) or "review"
	First     []string `json:"first"`
	Second    []string `json:"second"`
	Deltas    int      `json:"deltas"`
	Workspace string   `json:"workspace"`
	// Hold, if set, holds the pair after the feed got this sequence
	// until the harness releases it.
	Hold uint64 `json:"hold"`
}

type harness struct {
	t     testing.TB
	st    *store.Store
	sched *scheduler.Scheduler
	srv   *server.Server
	http  *httptest.Server
	data  string

	mu    sync.Mutex
	holds map[string]*hold         // by pair ID
	ended map[string]chan struct{} // by pair ID: closed by the pair terminal
}

// hold is a required timeline observer after the feed: it blocks the pair
// once it saw seq until released.
type hold struct {
	seq     uint64
	reached chan struct{}
	release chan struct{}
}

func (h *hold) Observe(ctx context.Context, e eventlog.Event) error {
	if e.Seq() != h.seq {
		return nil
	}
	close(h.reached)
	select {
	case <-h.release:
	case <-time.After(time.Minute): // a bound, should a test forget to release
	}
	return nil
}

type options struct {
	queue, pairs int
	token        string
	lag          int
	mutate       func(*server.Config)
	storePath    string
	data         string // the data directory; a new one when ""
	// smallBuffers gives every accepted connection a 4 KiB send buffer,
	// so a client that stops reading stalls the server's writes soon.
	smallBuffers bool
}

type smallBufferListener struct{ net.Listener }

func (l smallBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

func newHarness(t testing.TB, o options) *harness {
	t.Helper()
	dir := t.TempDir()
	if o.storePath == "" {
		o.storePath = dir + "/runs.db"
	}
	st, err := store.Open(context.Background(), o.storePath)
	require.NoError(t, err)
	sched, err := scheduler.New(scheduler.Config{Pairs: o.pairs, Queue: o.queue})
	require.NoError(t, err)
	h := &harness{t: t, st: st, sched: sched, data: dir + "/data", holds: make(map[string]*hold), ended: make(map[string]chan struct{})}
	if o.data != "" {
		h.data = o.data
	}
	cfg := server.Config{
		Scheduler: sched, Store: st, Build: h.build, DataDir: h.data, Token: o.token, StreamLag: o.lag,
		Examples: []server.Example{{Name: "relay", ContentType: "application/json", Spec: `{"first":["a"],"second":["b"]}`}},
	}
	if o.mutate != nil {
		o.mutate(&cfg)
	}
	h.srv, err = server.New(cfg)
	require.NoError(t, err)
	h.http = httptest.NewUnstartedServer(h.srv.Handler())
	if o.smallBuffers {
		h.http.Listener = smallBufferListener{h.http.Listener}
	}
	h.http.Start()
	t.Cleanup(h.close)
	return h
}

func (h *harness) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.mu.Lock()
	for _, hd := range h.holds {
		select {
		case <-hd.release:
		default:
			close(hd.release)
		}
	}
	h.mu.Unlock()
	h.http.CloseClientConnections()
	h.http.Close()
	require.NoError(h.t, h.sched.Shutdown(ctx))
	require.NoError(h.t, h.srv.Close(ctx))
	require.NoError(h.t, h.st.Close())
}

// build is the harness's BuildFunc.
func (h *harness) build(ctx context.Context, req server.BuildRequest) (server.Built, error) {
	var sp testSpec
	if err := json.Unmarshal(req.Body, &sp); err != nil {
		return server.Built{}, &server.RequestError{Message: "request.json:1: not a test spec", Line: 1, Err: err}
	}
	if sp.Workspace != "" {
		return server.Built{}, &server.RequestError{Field: "workspace", Line: 1,
			Message: "request.json:1: workspace: a spec sent over HTTP may not name a workspace"}
	}
	plans, err := enginetest.Plan("plan-" + req.PairID)
	if err != nil {
		return server.Built{}, err
	}
	ended := make(chan struct{})
	h.mu.Lock()
	h.ended[req.PairID] = ended
	h.mu.Unlock()
	timeline := []eventlog.Observer{h.st, req.Timeline, eventlog.ObserverFunc(func(_ context.Context, e eventlog.Event) error {
		if orchestrator.Terminal(e.Kind()) {
			close(ended)
		}
		return nil
	})}
	if sp.Hold > 0 {
		hd := &hold{seq: sp.Hold, reached: make(chan struct{}), release: make(chan struct{})}
		h.mu.Lock()
		h.holds[req.PairID] = hd
		h.mu.Unlock()
		timeline = append(timeline, hd)
	}
	pattern := orchestrator.Relay
	if sp.Pattern == "review" {
		pattern = orchestrator.ReviewLoop
	}
	cfg := &orchestrator.Config{
		ID: req.PairID, Plans: plans, Pattern: pattern, Task: "test task", Clock: clock,
		First:    h.worker(req.PairID, "writer", sp.First, sp.Deltas),
		Second:   h.worker(req.PairID, "reviewer", sp.Second, sp.Deltas),
		Timeline: orchestrator.TimelineConfig{Required: timeline},
	}
	return server.Built{Config: cfg}, nil
}

func (h *harness) worker(pairID, role string, answers []string, deltas int) workers.Config {
	def, err := engine.NewDefinition(engine.DefinitionConfig{Name: role, Model: "scripted-1", MaxTurns: 4})
	require.NoError(h.t, err)
	var script [][]model.Item
	for _, a := range answers {
		var items []model.Item
		for _, part := range split(a, max(deltas, 1)) {
			items = append(items, enginetest.Text(part))
		}
		script = append(script, append(items, enginetest.Done(10, 5)))
	}
	return workers.Config{Role: role, Definition: def, Engine: engine.Config{
		Provider: enginetest.NewProvider(script...), IDs: &id.Counter{Prefix: pairID + "/" + role + "/"}, Clock: clock,
		Required: []eventlog.Observer{h.st}}}
}

// split cuts s into n non-empty parts (fewer when s is shorter).
func split(s string, n int) []string {
	if n <= 1 || len(s) <= 1 {
		return []string{s}
	}
	size := max(len(s)/n, 1)
	var out []string
	for len(s) > 0 {
		k := min(size, len(s))
		if len(out) == n-1 {
			k = len(s)
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

func (h *harness) holdOf(pairID string) *hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holds[pairID]
}

func (h *harness) url(path string) string { return h.http.URL + path }

type response struct {
	status int
	header http.Header
	body   []byte
}

func (h *harness) do(method, path, ctype, body string, hdr ...string) response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url(path), strings.NewReader(body))
	require.NoError(h.t, err)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.http.Client().Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return response{resp.StatusCode, resp.Header, b}
}

// submit starts a pair and returns its ID.
func (h *harness) submit(sp testSpec) string {
	h.t.Helper()
	b, err := json.Marshal(sp)
	require.NoError(h.t, err)
	r := h.do("POST", "/v1/pairs", "application/json", string(b))
	require.Equal(h.t, http.StatusCreated, r.status, string(r.body))
	var v struct{ ID string }
	require.NoError(h.t, json.Unmarshal(r.body, &v))
	require.Equal(h.t, "/v1/pairs/"+v.ID, r.header.Get("Location"))
	return v.ID
}

// wait waits, a minute at most, until the pair's terminal is durable and
// returns its JSON lines as the server streams them.
func (h *harness) wait(pairID string) []byte {
	h.t.Helper()
	h.waitEnded(pairID)
	r := h.do("GET", "/v1/pairs/"+pairID+"/events.jsonl", "", "")
	require.Equal(h.t, http.StatusOK, r.status, string(r.body))
	return r.body
}

// waitEnded waits, a minute at most, until the pair's terminal is durable.
func (h *harness) waitEnded(pairID string) {
	h.t.Helper()
	h.mu.Lock()
	ended := h.ended[pairID]
	h.mu.Unlock()
	require.NotNil(h.t, ended)
	select {
	case <-ended:
	case <-time.After(time.Minute):
		h.t.Fatal("the pair did not end within a minute")
	}
}

// sseEvent is one parsed SSE frame.
type sseEvent struct {
	id, event, data string
}

// readSSE reads frames from an SSE body until the "end" event, EOF or
// stop returns true.
func readSSE(t *testing.T, body io.Reader, stop func(sseEvent) bool) ([]sseEvent, error) {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var out []sseEvent
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur == (sseEvent{}) {
				continue
			}
			out = append(out, cur)
			if cur.event == "end" || (stop != nil && stop(cur)) {
				return out, nil
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry:"):
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	if err := sc.Err(); err != nil {
		return out, err
	}
	return out, io.EOF
}

// openSSE connects to the pair's event stream after the cursor.
func (h *harness) openSSE(ctx context.Context, pairID string, after uint64, lastEventID bool) *http.Response {
	h.t.Helper()
	path := "/v1/pairs/" + pairID + "/events"
	req, err := http.NewRequestWithContext(ctx, "GET", h.url(path), nil)
	require.NoError(h.t, err)
	if lastEventID {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(after, 10))
	} else if after > 0 {
		req.URL.RawQuery = "after=" + strconv.FormatUint(after, 10)
	}
	resp, err := h.http.Client().Do(req)
	require.NoError(h.t, err)
	require.Equal(h.t, http.StatusOK, resp.StatusCode)
	require.Equal(h.t, "text/event-stream", resp.Header.Get("Content-Type"))
	return resp
}

// jsonLines splits a JSON lines body into lines with their sequences.
func jsonLines(t *testing.T, b []byte) (lines []string, seqs []uint64) {
	t.Helper()
	lines = []string{}
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		var v struct{ Seq uint64 }
		require.NoError(t, json.Unmarshal([]byte(l), &v), l)
		lines = append(lines, l)
		seqs = append(seqs, v.Seq)
	}
	return lines, seqs
}

// frames checks that evs are timeline events with consecutive ids from
// first and returns their data.
func frames(t *testing.T, evs []sseEvent, first uint64) []string {
	t.Helper()
	out := []string{}
	for i, e := range evs {
		require.Equal(t, "", e.event, "frame %d", i)
		require.Equal(t, strconv.FormatUint(first+uint64(i), 10), e.id, "frame %d: gap or duplicate", i)
		out = append(out, e.data)
	}
	return out
}

func replay(t *testing.T, st *store.Store, pairID string) []byte {
	t.Helper()
	var b strings.Builder
	require.NoError(t, st.ReplayJSON(context.Background(), &b, pairID))
	return []byte(b.String())
}

var errStop = errors.New("stop")

var clock = engine.ClockFunc(time.Now)
