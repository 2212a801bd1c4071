//go:build unix

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// resumeRelay is a relay whose writer answers once and whose reviewer
// answers once: cut after the writer's model operation, it resumes by
// restarting the writer's run from the recorded answer.
const resumeRelay = `version: 1
name: resume-demo
pattern: relay
workers:
  - role: writer
    provider: scripted
    script:
      - text: "the draft"
  - role: reviewer
    provider: scripted
    script:
      - text: "fine"
`

// cutStore records into the store until it has recorded a pair's first
// relayed timeline event of kind; from then on it records nothing more of
// that pair and refuses it, as a store whose process was killed right
// after that write would have it.
type cutStore struct {
	next    eventlog.Observer
	kind    string
	mu      sync.Mutex
	cut     map[string]bool
	reached chan string
}

var errCut = errors.New("cut: the process is gone")

func newCutStore(kind string) *cutStore {
	return &cutStore{kind: kind, cut: map[string]bool{}, reached: make(chan string, 4)}
}

func (c *cutStore) wrap(st eventlog.Observer) eventlog.Observer { c.next = st; return c }

func (c *cutStore) Observe(ctx context.Context, e eventlog.Event) error {
	pair, _, _ := strings.Cut(e.Log(), "/")
	c.mu.Lock()
	cut := c.cut[pair]
	c.mu.Unlock()
	if cut {
		return errCut
	}
	if err := c.next.Observe(ctx, e); err != nil {
		return err
	}
	if _, ok := e.Payload().(orchestrator.Relayed); !ok || e.Log() != pair || !strings.Contains(string(e.AppendJSON(nil)), `"kind":"`+c.kind+`"`) {
		return nil
	}
	c.mu.Lock()
	c.cut[pair] = true
	c.mu.Unlock()
	c.reached <- pair
	return errCut
}

// interruptedPair plays resumeRelay on a serve whose store is cut after
// the writer's model.completed, stops that serve, and returns the store
// and data directory it left and the pair, which the next serve on them
// shows as interrupted.
func interruptedPair(t *testing.T) (db, data, pairID string) {
	t.Helper()
	dir := t.TempDir()
	db, data = filepath.Join(dir, "runs.db"), filepath.Join(dir, "data")
	paths := func(f *serveFlags) { f.store, f.dataDir = db, data }
	cut := newCutStore("model.completed")
	ts := startTestServerWith(t, paths, cut.wrap)
	status, body := post(t, ts.url, "application/yaml", resumeRelay)
	require.Equal(t, http.StatusCreated, status, body)
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	require.Equal(t, created.ID, <-cut.reached)
	// The pair fails in this serve without a terminal in the store;
	// once the serve (its store's owner) is gone, it is interrupted.
	ts.stop()
	<-ts.stopped(t)
	return db, data, created.ID
}

func getBody(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestR3_BrowserResumesAnInterruptedPair: a pair that a stopped serve left
// interrupted shows a Resume button on the next serve; clicking it
// continues the pair on the same page, which shows the pair.resumed
// event and the rest of the timeline, gap-free, to one terminal.
func TestR3_BrowserResumesAnInterruptedPair(t *testing.T) {
	db, data, pairID := interruptedPair(t)
	ts := startTestServerWith(t, func(f *serveFlags) { f.store, f.dataDir = db, data }, nil)
	status, body := getBody(t, ts.url+"/v1/pairs/"+pairID)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"state":"interrupted"`)
	require.Contains(t, body, `"resumable":true`)

	ctx, cancel := newBrowser(t)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/pairs/"+pairID)))
	require.NoError(t, waitJS(ctx, `document.getElementById('pair-state').textContent === 'interrupted' && !document.getElementById('resume').hidden && document.body.dataset.streamEnded !== undefined`))
	require.NoError(t, waitJS(ctx, `document.querySelectorAll('#timeline .interrupted-marker').length === 1`))
	require.Equal(t, "interrupted-marker", eval[string](t, ctx, `[...document.querySelectorAll('#timeline .block')].sort((a, b) => Number(a.style.gridRow) - Number(b.style.gridRow)).pop().classList[2]`), "the marker follows the last event")
	before := len(seqsOf(t, ctx))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#resume`)))
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined && document.getElementById('pair-state').textContent === 'completed'`))
	seqs := seqsOf(t, ctx)
	require.Greater(t, len(seqs), before)
	requireRun(t, seqs, len(seqs))
	require.Contains(t, text(t, ctx, `#timeline .resumed`), "restarting run")
	require.Equal(t, 1, eval[int](t, ctx, `document.querySelectorAll('#timeline .terminal:not(.interrupted-marker)').length`))
	require.True(t, eval[bool](t, ctx, `document.getElementById('resume').hidden`))
	require.Zero(t, eval[int](t, ctx, `document.querySelectorAll('#timeline .interrupted-marker').length`), "the resumed block replaces the marker")
	require.Empty(t, text(t, ctx, `#resume-box`))
	shot(t, ctx, "9-resumed.png")
}

// TestR3_BrowserShowsResumeRefusals: a refusal of the resume route is
// shown as text with its code: uncertain_tool_call names the call and
// offers to accept it as failed, which sends accept_uncertain naming it;
// not_resumable (the pair's workspace went away) says why.
func TestR3_BrowserShowsResumeRefusals(t *testing.T) {
	db, data, pairID := interruptedPair(t)
	ts := startTestServerWith(t, func(f *serveFlags) { f.store, f.dataDir = db, data }, nil)
	u, err := url.Parse(ts.url)
	require.NoError(t, err)
	// The builtin tools cannot leave an uncertain call (fs.write is
	// idempotent), so the first refusal is the server's answer as a proxy
	// gives it; the accept that follows goes to the server.
	const call = "call-<b>7</b>\u202e"
	accepted := make(chan string, 1)
	proxy := httputil.NewSingleHostReverseProxy(u)
	var once sync.Once
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && r.URL.Path == "/v1/pairs/"+pairID+"/resume" {
			b, _ := io.ReadAll(r.Body)
			first := false
			once.Do(func() { first = true })
			if first {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusConflict)
				refusal, _ := json.Marshal(map[string]any{"error": map[string]string{"code": "uncertain_tool_call", "call": call,
					"message": "call " + call + " (fs.write) started and its outcome was never recorded"}})
				_, _ = w.Write(refusal)
				return
			}
			accepted <- string(b)
			r.Body = io.NopCloser(strings.NewReader(""))
			r.ContentLength = 0
			r.Header.Del("Content-Type")
		}
		proxy.ServeHTTP(w, r)
	}))
	defer px.Close()

	ctx, cancel := newBrowser(t)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(px.URL+"/#/pairs/"+pairID)))
	require.NoError(t, waitJS(ctx, `!document.getElementById('resume').hidden && document.body.dataset.streamEnded !== undefined`))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#resume`)))
	require.NoError(t, waitJS(ctx, `!!document.querySelector('#resume-box .accept-uncertain')`))
	box := text(t, ctx, `#resume-box`)
	require.Contains(t, box, "uncertain_tool_call")
	require.Contains(t, box, `call-<b>7</b>\u202e`, "the call is named, as inert text with its override shown")
	require.Zero(t, eval[int](t, ctx, `document.querySelectorAll('#resume-box b').length`))

	// The workspace goes away before the accept: the server refuses.
	ws := filepath.Join(data, "workspaces", pairID)
	require.NoError(t, os.Rename(ws, ws+".away"))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#resume-box .accept-uncertain`)))
	require.JSONEq(t, `{"accept_uncertain":["`+strings.ReplaceAll(call, "\u202e", `\u202e`)+`"]}`, <-accepted)
	require.NoError(t, waitJS(ctx, `document.getElementById('resume-box').textContent.includes('not_resumable')`))
	require.Contains(t, text(t, ctx, `#resume-box`), "the pair's workspace is gone")
	require.NoError(t, waitJS(ctx, `document.getElementById('resume').hidden`), "a pair the server cannot resume has no Resume button")
	require.Equal(t, "interrupted", text(t, ctx, `#pair-state`))
}
