//go:build unix

package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// bigPair serves, for one made-up pair, a recorded-looking timeline of
// 743 events and about 14 MiB — the size of a long real pair — and
// passes everything else to serve.
type bigPair struct {
	id     string
	frames []byte
	last   int
	proxy  http.Handler
}

func newBigPair(upstream http.Handler) *bigPair {
	const id = "pair-20260101-000000-00000b16"
	b := &bigPair{id: id, proxy: upstream}
	var sb strings.Builder
	seq := 0
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	emit := func(kind string, payload any) {
		seq++
		p, err := json.Marshal(payload)
		if err != nil {
			panic(err)
		}
		at := t0.Add(time.Duration(seq) * 37 * time.Millisecond).Format(time.RFC3339Nano)
		fmt.Fprintf(&sb, "id: %d\ndata: {\"seq\":%d,\"kind\":%q,\"time\":%q,\"payload\":%s}\n\n", seq, seq, kind, at, p)
	}
	relay := func(worker, kind string, q map[string]any) {
		emit(kind, map[string]any{"worker": worker, "payload": q})
	}
	chunk := strings.Repeat("a long answer <b>not bold</b> \u202e reversed? ", 438) // ~20 KB
	emit("pair.started", map[string]any{"pair_id": id, "pattern": "relay", "workers": map[string]string{"first": "writer", "second": "reviewer"}})
	workers := []string{"writer", "reviewer"}
	for round := 0; seq+29 <= 742; round++ {
		w := workers[round%2]
		run := fmt.Sprintf("run-%d", round)
		op := fmt.Sprintf("op-%d", round)
		call := fmt.Sprintf("call-%d", round)
		relay(w, "run.started", map[string]any{"run_id": run, "model": "scripted"})
		relay(w, "turn.started", map[string]any{"index": 1})
		relay(w, "model.started", map[string]any{"operation_id": op})
		for range 20 {
			relay(w, "model.text_delta", map[string]any{"operation_id": op, "text": chunk})
		}
		relay(w, "model.completed", map[string]any{"operation_id": op, "input_tokens": 10, "output_tokens": 20, "tool_calls": 1})
		relay(w, "tool.started", map[string]any{"call_id": call, "name": "read_file", "effect": "read_only"})
		relay(w, "tool.completed", map[string]any{"call_id": call, "content": `{"ok":true}`})
		relay(w, "run.completed", map[string]any{"run_id": run, "turns": 1, "input_tokens": 10, "output_tokens": 20})
		emit("pair.handoff", map[string]any{"round": round + 1, "from": w, "to": workers[(round+1)%2], "bytes": 20, "sha256": strings.Repeat("ab", 32)})
	}
	for seq < 742 {
		relay("writer", "tool.progress", map[string]any{"call_id": "none"})
	}
	emit("pair.completed", map[string]any{"reason": "approved", "rounds": 1, "runs": 2, "input_tokens": 1, "output_tokens": 1, "tool_calls": 1})
	fmt.Fprintf(&sb, "event: end\ndata: {\"state\":\"completed\",\"last_seq\":%d}\n\n", seq)
	b.frames, b.last = []byte(sb.String()), seq
	return b
}

func (b *bigPair) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/pairs/" + b.id + "/events":
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(b.frames)
	case "/v1/pairs/" + b.id:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": b.id, "state": "completed", "reason": "approved", "workers": []any{}, "last_seq": b.last})
	default:
		b.proxy.ServeHTTP(w, r)
	}
}

// TestS2_BrowserRendersA14MiBPairInAboutASecond: a pair of 743 events and
// about 14 MiB is drawn, from the page's load to its stream's end, within
// the bound.
func TestS2_BrowserRendersA14MiBPairInAboutASecond(t *testing.T) {
	// The drawing itself (the page's JavaScript) takes about half a
	// second; the bound covers load, the stream and layout on a runner
	// whose two cores other jobs share.
	const bound = 10 * time.Second
	ts := startTestServer(t)
	u, err := url.Parse(ts.url)
	require.NoError(t, err)
	big := newBigPair(httputil.NewSingleHostReverseProxy(u))
	require.Equal(t, 743, big.last)
	require.InDelta(t, 14<<20, len(big.frames), 1<<20, "about 14 MiB")
	px := httptest.NewServer(big)
	defer px.Close()
	ctx, cancel := newBrowser(t)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(px.URL+"/")))
	start := time.Now()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(px.URL+"/#/pairs/"+big.id)))
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded === "743" && document.querySelectorAll('#waterfall .wf-row').length > 0`))
	took := time.Since(start)
	// The page's own measure: from navigation start to the end drawn.
	inPage := eval[float64](t, ctx, `performance.now()`)
	t.Logf("743 events, %d bytes: drawn in %v (page clock %.0f ms since load)", len(big.frames), took, inPage)
	requireRun(t, seqsOf(t, ctx), 743)
	require.Less(t, took, bound)
}
