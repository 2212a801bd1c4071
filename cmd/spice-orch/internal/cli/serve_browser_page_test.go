//go:build unix

package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/compose"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/serve"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// TestS2_BrowserShowsBidiAndZeroWidthCharactersVisibly: model text with a
// right-to-left override, bidirectional isolates and zero-width characters
// is shown with each of them as an escape, as the CLI shows them, in the
// timeline and in the raw JSON.
func TestS2_BrowserShowsBidiAndZeroWidthCharactersVisibly(t *testing.T) {
	ts := startTestServer(t)
	ctx, cancel := newBrowser(t)
	defer cancel()
	hostile := "invoice\u202etxt.exe \u2067isolated\u2069 zero\u200bwidth\u200djoin\ufeffbom\u061cmark"
	specYAML := "version: 1\nname: bidi-text\npattern: relay\nworkers:\n  - role: writer\n    provider: scripted\n    script:\n      - text: " +
		strconv.QuoteToASCII(hostile) + "\n  - role: reviewer\n    provider: scripted\n    script:\n      - text: \"ok\"\n"
	status, body := post(t, ts.url, "application/yaml", specYAML)
	require.Equal(t, http.StatusCreated, status, body)
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/pairs/"+created.ID)))
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined`))
	shown := eval[string](t, ctx, `[...document.querySelectorAll('#timeline .text-body')].map(n => n.textContent).join("\n")`)
	require.Contains(t, shown, `invoice\u202etxt.exe \u2067isolated\u2069 zero\u200bwidth\u200djoin\ufeffbom\u061cmark`)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#timeline .text`)))
	raw := text(t, ctx, `#raw-json`)
	page := eval[string](t, ctx, `document.body.textContent`)
	for _, r := range "\u202e\u2067\u2069\u200b\u200d\ufeff\u061c" {
		require.NotContains(t, shown, string(r), "U+%04X shown raw", r)
		require.NotContains(t, page, string(r), "U+%04X on the page", r)
		require.NotContains(t, raw, string(r), "U+%04X in the raw JSON", r)
	}
}

// repeater proxies serve for the browser and, in the first event stream
// it relays, sends frames 5 and 6 again right after frame 6: the page
// must show each event once and flag no gap.
type repeater struct {
	upstream *url.URL
	proxy    *httputil.ReverseProxy
	repeated atomic.Bool
}

func (p *repeater) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/events") || p.repeated.Load() {
		p.proxy.ServeHTTP(w, r)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), "GET", p.upstream.String()+r.URL.RequestURI(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		req.Header.Set("Last-Event-ID", v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	br := bufio.NewReader(resp.Body)
	var frame strings.Builder
	saved := map[string]string{}
	for {
		l, err := br.ReadString('\n')
		frame.WriteString(l)
		if l == "\n" || err != nil {
			f := frame.String()
			frame.Reset()
			_, _ = io.WriteString(w, f)
			if id, ok := strings.CutPrefix(f, "id: "); ok {
				id, _, _ = strings.Cut(id, "\n")
				saved[id] = f
				if id == "6" && p.repeated.CompareAndSwap(false, true) {
					_, _ = io.WriteString(w, saved["5"]+saved["6"])
				}
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// TestS1_BrowserShowsARepeatedEventOnceWithoutAGap: a stream that sends
// events the page has already shown (as a reconnect that overlaps can)
// leaves the page showing each event once, in order, with no gap flagged.
func TestS1_BrowserShowsARepeatedEventOnceWithoutAGap(t *testing.T) {
	ts := startTestServer(t)
	u, err := url.Parse(ts.url)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	p := &repeater{upstream: u, proxy: rp}
	px := httptest.NewServer(p)
	defer px.Close()
	ctx, cancel := newBrowser(t)
	defer cancel()

	status, body := post(t, ts.url, "application/yaml", serve.BuiltinYAML())
	require.Equal(t, http.StatusCreated, status, body)
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(px.URL+"/#/pairs/"+created.ID)))
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined`))
	require.True(t, p.repeated.Load(), "the repeat was sent")
	seqs := seqsOf(t, ctx)
	require.Greater(t, len(seqs), 6)
	requireRun(t, seqs, len(seqs))
	require.False(t, eval[bool](t, ctx, `document.body.dataset.gap !== undefined`), "no gap flagged")
	blocks := eval[int](t, ctx, `[...document.querySelectorAll('#timeline [data-seqs]')].filter(n => n.dataset.seqs.split(" ").includes("6")).length`)
	require.Equal(t, 1, blocks, "event 6 is drawn once")
}

// TestS1_BrowserFollowsAPairAnotherProcessRecords: a pair that another
// writer records into serve's store is drawn live from the store to its
// terminal, and the page offers no Cancel for it.
func TestS1_BrowserFollowsAPairAnotherProcessRecords(t *testing.T) {
	ts := startTestServer(t)
	st, err := openStore(context.Background(), filepath.Join(ts.dir, "runs.db"), true)
	require.NoError(t, err)
	defer st.Close()
	gate := newGate(10)
	defer gate.open()
	const pairID = "pair-20260101-000000-00000abc"
	p, err := compose.Build(compose.Options{Spec: spec.Builtin(), Workspace: t.TempDir(), PairID: pairID,
		Store: st, Timeline: []eventlog.Observer{gate}})
	require.NoError(t, err)
	defer p.Close()
	pair, err := orchestrator.Start(context.Background(), p.Config)
	require.NoError(t, err)
	<-gate.reached

	ctx, cancel := newBrowser(t)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/pairs/"+pairID)))
	require.NoError(t, waitJS(ctx, `document.body.dataset.lastSeq === "10" && document.getElementById('pair-state').textContent === 'running'`))
	require.True(t, eval[bool](t, ctx, `document.getElementById('cancel').disabled`), "no Cancel for a pair this server does not play")
	gate.open()
	_, err = pair.Wait(context.Background())
	require.NoError(t, err)
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined && document.getElementById('pair-state').textContent === 'completed'`))
	seqs := seqsOf(t, ctx)
	requireRun(t, seqs, len(seqs))
	require.Greater(t, len(seqs), 10)
	require.Contains(t, text(t, ctx, `#timeline .terminal`), "pair.completed · reason approved")
	require.True(t, eval[bool](t, ctx, `document.getElementById('cancel').disabled`))
}
