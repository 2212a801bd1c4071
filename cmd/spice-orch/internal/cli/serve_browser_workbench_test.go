//go:build unix

package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/serve"
)

// tinySpec is a pair of two scripted workers that ends at once.
const tinySpec = "version: 1\nname: %s\npattern: relay\nworkers:\n  - role: writer\n    provider: scripted\n    script:\n      - text: \"draft\"\n  - role: reviewer\n    provider: scripted\n    script:\n      - text: \"ok\"\n"

// submit posts a spec with a task (none if "") and waits, reading its
// event stream, until the pair has ended. It returns the pair's ID.
func submit(t *testing.T, base, specYAML, task string) string {
	t.Helper()
	u := base + "/v1/pairs"
	if task != "" {
		u += "?task=" + url.QueryEscape(task)
	}
	resp, err := http.Post(u, "application/yaml", strings.NewReader(specYAML))
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(b))
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal(b, &created))
	ev, err := http.Get(base + "/v1/pairs/" + created.ID + "/events")
	require.NoError(t, err)
	defer ev.Body.Close()
	br := bufio.NewReader(ev.Body)
	for {
		l, err := br.ReadString('\n')
		require.NoError(t, err, "the stream ended before its end event")
		if strings.HasPrefix(l, "event: end") {
			return created.ID
		}
	}
}

// hostileText holds HTML, a right-to-left override, an isolate, zero-width
// characters and a terminal escape sequence.
const hostileText = "<b>bold</b><img src=x onerror=\"window.__xss=1\"> invoice\u202etxt.exe \u2067iso\u2069 zero\u200bwidth \x1b[31mred\x1b[0m"

// TestS2_BrowserShowsTheTaskOnTheHeaderAsInertText: a task given with
// ?task= is in the pair resource and on the page's header, as text, with
// bidirectional, zero-width and escape characters shown as escapes.
func TestS2_BrowserShowsTheTaskOnTheHeaderAsInertText(t *testing.T) {
	ts := startTestServer(t)
	ctx, cancel := newBrowser(t)
	defer cancel()
	id := submit(t, ts.url, fmt.Sprintf(tinySpec, "header-task"), hostileText)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/pairs/"+id)))
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined && document.getElementById('pair-task').textContent !== ''`))
	task := text(t, ctx, `#pair-task`)
	require.Contains(t, task, `<b>bold</b><img src=x onerror="window.__xss=1"> invoice\u202etxt.exe \u2067iso\u2069 zero\u200bwidth \x1b[31mred\x1b[0m`)
	require.Equal(t, "header-task", text(t, ctx, `#pair-name`))
	require.Zero(t, eval[int](t, ctx, `document.querySelectorAll('b, img').length`))
	require.False(t, eval[bool](t, ctx, `window.__xss !== undefined`), "the task ran as code")
	page := eval[string](t, ctx, `document.body.textContent`)
	for _, r := range "\u202e\u2067\u2069\u200b\x1b" {
		require.NotContains(t, page, string(r), "U+%04X on the page", r)
	}
	// The list shows it too, and a search by the task finds the pair.
	require.NoError(t, waitJS(ctx, `[...document.querySelectorAll('#pairs .task')].some(n => n.textContent.includes('invoice\\u202e'))`))
}

// TestS2_BrowserShowsDurationsAndTheSlowestStep: runs, model operations and
// tool calls show when they started and how long they took, and the time
// axis marks the slowest.
func TestS2_BrowserShowsDurationsAndTheSlowestStep(t *testing.T) {
	ts := startTestServer(t)
	ctx, cancel := newBrowser(t)
	defer cancel()
	id := submit(t, ts.url, serve.BuiltinYAML(), "")
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/pairs/"+id)))
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined && document.querySelectorAll('#waterfall .wf-row').length > 0`))
	for _, sel := range []string{"#timeline .run .dur.start", "#timeline .run-end .dur.took", "#timeline .text .dur.took", "#timeline .tool .dur.took"} {
		require.Positive(t, eval[int](t, ctx, `document.querySelectorAll(`+strconv.Quote(sel)+`).length`), sel)
	}
	took := eval[string](t, ctx, `document.querySelector('#timeline .run-end .dur.took').textContent`)
	require.Regexp(t, `^took [0-9.]+(ms|s)$`, took)
	require.Equal(t, 1, eval[int](t, ctx, `document.querySelectorAll('#waterfall .wf-row.slowest').length`))
	require.Equal(t, 1, eval[int](t, ctx, `document.querySelectorAll('#timeline .slowest').length`))
	require.Contains(t, text(t, ctx, `#slowest`), "slowest:")
	require.Contains(t, text(t, ctx, `#pair-time`), "took ")
	shot(t, ctx, "6-durations.png")
}

// TestS2_BrowserPagesToThe51stPairAndSearchesByTask: with 51 recorded
// pairs, "More" reaches the oldest; a search by its task finds it alone;
// filters by state and reason keep what they name.
func TestS2_BrowserPagesToThe51stPairAndSearchesByTask(t *testing.T) {
	ts := startTestServer(t)
	first := submit(t, ts.url, fmt.Sprintf(tinySpec, "oldest"), "find the needle 51")
	for i := range 50 {
		submit(t, ts.url, fmt.Sprintf(tinySpec, "p"+strconv.Itoa(i)), "")
	}
	ctx, cancel := newBrowser(t)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/pairs/"+first)))
	require.NoError(t, waitJS(ctx, `document.querySelectorAll('#pairs .pair-item').length === 50 && !document.getElementById('more').hidden`))
	require.False(t, eval[bool](t, ctx, `!!document.querySelector('#pairs .pair-item[data-id="`+first+`"]')`))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#more`)))
	require.NoError(t, waitJS(ctx, `!!document.querySelector('#pairs .pair-item[data-id="`+first+`"]')`))
	require.Equal(t, 51, eval[int](t, ctx, `document.querySelectorAll('#pairs .pair-item').length`))
	require.True(t, eval[bool](t, ctx, `document.getElementById('more').hidden`))

	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(`#search`, "NEEDLE 51")))
	require.NoError(t, waitJS(ctx, `document.querySelectorAll('#pairs .pair-item').length === 1`))
	require.Equal(t, first, eval[string](t, ctx, `document.querySelector('#pairs .pair-item').dataset.id`))
	item := text(t, ctx, `#pairs .pair-item`)
	for _, col := range []string{"completed", "oldest", "writer, reviewer", "find the needle 51"} {
		require.Contains(t, item, col)
	}
	setField(t, ctx, "search", "")
	setField(t, ctx, "filter-reason", "max_rounds")
	require.NoError(t, waitJS(ctx, `document.querySelectorAll('#pairs .pair-item').length === 0`))
	setField(t, ctx, "filter-reason", "")
	setField(t, ctx, "filter-state", "failed")
	require.NoError(t, waitJS(ctx, `document.querySelectorAll('#pairs .pair-item').length === 0`))
	setField(t, ctx, "filter-state", "completed")
	require.NoError(t, waitJS(ctx, `document.querySelectorAll('#pairs .pair-item').length === 50`))
}

// TestS2_BrowserLoginSaysTheTokenWasWrong: a wrong token brings the login
// page back saying so; the right one opens the page, whose Log out ends
// the session; /favicon.ico is served.
func TestS2_BrowserLoginSaysTheTokenWasWrong(t *testing.T) {
	ts := startTestServerWith(t, func(f *serveFlags) { f.token = "right-token" }, nil)
	ctx, cancel := newBrowser(t)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/"), chromedp.WaitVisible(`input[name=token]`)))
	require.True(t, eval[bool](t, ctx, `document.getElementById('login-error').hidden`), "no error before a try")
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(`input[name=token]`, "wrong-token"), chromedp.Submit(`input[name=token]`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(`#login-error`)))
	require.Equal(t, "?failed=1", eval[string](t, ctx, `location.search`))
	require.False(t, eval[bool](t, ctx, `document.getElementById('login-error').hidden`))
	require.Contains(t, text(t, ctx, `#login-error`), "token was wrong")
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(`input[name=token]`, "right-token"), chromedp.Submit(`input[name=token]`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(`#logout`)))
	require.Equal(t, 200, fetchStatus(t, ctx, "/favicon.ico"))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#logout`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(`#login-out`)))
	require.Equal(t, "/login", eval[string](t, ctx, `location.pathname`))
	require.Equal(t, 401, fetchStatus(t, ctx, "/v1/pairs"))
}

// fetchStatus is the status the page gets fetching path.
func fetchStatus(t *testing.T, ctx context.Context, path string) int {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch(`+strconv.Quote(path)+`).then(r => r.status)`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	return v
}

// setField sets a form field as typing or choosing would: its value, then
// its input and change events.
func setField(t *testing.T, ctx context.Context, id, value string) {
	t.Helper()
	eval[bool](t, ctx, `(() => { const f = document.getElementById(`+strconv.Quote(id)+`); f.value = `+strconv.Quote(value)+
		`; f.dispatchEvent(new Event('input')); return f.dispatchEvent(new Event('change')); })()`)
}

// failingSpec is a pair whose writer writes a file, then has no step for
// its next operation: the run fails with script_exhausted.
const failingSpec = `version: 1
name: failing-writer
pattern: relay
approve: never
workers:
  - role: writer
    provider: scripted
    script:
      - text: "Writing the draft first."
        calls:
          - name: fs.write
            arguments:
              path: draft.md
              content: "# Draft\n"
  - role: reviewer
    provider: scripted
    script:
      - text: "ok"
`

// TestS2_BrowserScreenshotsOfACompletedAndAFailingPair draws the built-in
// pair and a failing one and takes their screenshots; with
// SPICE_ORCH_SCREENSHOTS=1 (make screenshots) they replace docs/*.png.
func TestS2_BrowserScreenshotsOfACompletedAndAFailingPair(t *testing.T) {
	ts := startTestServer(t)
	ctx, cancel := newBrowser(t)
	defer cancel()
	shots := map[string]string{
		"serve-completed.png": submit(t, ts.url, serve.BuiltinYAML(), "Write a short design note on retries and have it reviewed."),
		"serve-failed.png":    submit(t, ts.url, failingSpec, ""),
	}
	want := map[string]string{"serve-completed.png": "completed", "serve-failed.png": "failed"}
	for name, id := range shots {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/pairs/"+id)))
		require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined && document.getElementById('pair-state').textContent === `+strconv.Quote(want[name])+
			` && document.querySelectorAll('#waterfall .wf-row').length > 0`))
		shot(t, ctx, name)
		if os.Getenv("SPICE_ORCH_SCREENSHOTS") != "" {
			b, err := os.ReadFile(filepath.Join(outDir(t), name))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(outDir(t), "..", "..", "docs", name), b, 0o644))
		}
	}
}

// TestS2_BrowserOpensTheNewestPairWhenNoneIsNamed: the page opened
// without a pair in its address, once the only pair (the demo's) has
// ended, shows that pair rather than an empty pane.
func TestS2_BrowserOpensTheNewestPairWhenNoneIsNamed(t *testing.T) {
	ts := startTestServer(t)
	id := submit(t, ts.url, serve.BuiltinYAML(), "")
	ctx, cancel := newBrowser(t)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/")))
	require.NoError(t, waitJS(ctx, `!document.getElementById('pair').hidden && document.body.dataset.streamEnded !== undefined`))
	require.Equal(t, id, text(t, ctx, `#pair-id`))
	require.True(t, eval[bool](t, ctx, `document.getElementById('empty').hidden`))
}

// TestS2_BrowserStaysQuietWhenTheServerIsDown: with the server stopped,
// the page's polling throws nothing uncaught and says the server does not
// answer.
func TestS2_BrowserStaysQuietWhenTheServerIsDown(t *testing.T) {
	ts := startTestServer(t)
	id := submit(t, ts.url, fmt.Sprintf(tinySpec, "quiet"), "")
	ctx, cancel := newBrowser(t)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/pairs/"+id)))
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined`))
	eval[bool](t, ctx, `window.__uncaught = 0; addEventListener('unhandledrejection', () => window.__uncaught++); addEventListener('error', () => window.__uncaught++); true`)
	ts.stop()
	<-ts.stopped(t)
	require.NoError(t, waitJS(ctx, `!document.getElementById('offline').hidden`))
	// Two more polls fail while the test watches.
	eval[bool](t, ctx, `window.__polled = 0; const f = window.fetch; window.fetch = (...a) => { window.__polled++; return f(...a); }; true`)
	require.NoError(t, waitJS(ctx, `window.__polled >= 2`))
	require.Zero(t, eval[int](t, ctx, `window.__uncaught`))
}

// TestS2_BrowserMarksAnInterruptedPair: a pair whose stream ends without
// a terminal event, in state interrupted, keeps no streaming caret and
// shows an interrupted marker.
func TestS2_BrowserMarksAnInterruptedPair(t *testing.T) {
	ts := startTestServer(t)
	u, err := url.Parse(ts.url)
	require.NoError(t, err)
	const id = "pair-20260101-000000-0000dead"
	frames := "id: 1\ndata: {\"seq\":1,\"kind\":\"pair.started\",\"time\":\"2026-01-01T00:00:00Z\",\"payload\":{\"pattern\":\"relay\",\"workers\":{\"first\":\"writer\",\"second\":\"reviewer\"}}}\n\n" +
		"id: 2\ndata: {\"seq\":2,\"kind\":\"model.started\",\"time\":\"2026-01-01T00:00:01Z\",\"payload\":{\"worker\":\"writer\",\"payload\":{\"operation_id\":\"op-1\"}}}\n\n" +
		"id: 3\ndata: {\"seq\":3,\"kind\":\"model.text_delta\",\"time\":\"2026-01-01T00:00:02Z\",\"payload\":{\"worker\":\"writer\",\"payload\":{\"operation_id\":\"op-1\",\"text\":\"half an ans\"}}}\n\n" +
		"event: end\ndata: {\"state\":\"interrupted\",\"last_seq\":3}\n\n"
	proxy := httputil.NewSingleHostReverseProxy(u)
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/pairs/" + id + "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, frames)
		case "/v1/pairs/" + id:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"`+id+`","state":"interrupted","workers":[],"last_seq":3}`)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	defer px.Close()
	ctx, cancel := newBrowser(t)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(px.URL+"/#/pairs/"+id)))
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined && document.getElementById('pair-state').textContent === 'interrupted'`))
	require.NoError(t, waitJS(ctx, `document.querySelectorAll('#timeline .interrupted-marker').length === 1`))
	require.Zero(t, eval[int](t, ctx, `document.querySelectorAll('#timeline .streaming').length`), "no streaming caret")
	require.Contains(t, text(t, ctx, `#timeline .interrupted-marker`), "interrupted")
}
