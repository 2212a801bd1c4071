//go:build unix

package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// chromium is Debian's Chromium, which .ci/run installs.
const chromium = "/usr/bin/chromium"

// browserGate holds a pair after one timeline event until released.
type browserGate struct {
	seq     uint64
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate(seq uint64) *browserGate {
	return &browserGate{seq: seq, reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *browserGate) Observe(_ context.Context, e eventlog.Event) error {
	if e.Seq() != g.seq {
		return nil
	}
	close(g.reached)
	select {
	case <-g.release:
	case <-time.After(time.Minute): // a bound, should the test fail first
	}
	return nil
}

func (g *browserGate) open() { g.once.Do(func() { close(g.release) }) }

// testServer runs `serve` in-process on a random loopback port; each new
// pair takes the next gate of gates (none once they are used up).
type testServer struct {
	url   string
	dir   string
	mu    sync.Mutex
	gates []*browserGate
	done  chan error
	stop  context.CancelFunc
	down  chan struct{} // closed once stopped finds serve ended
}

// stopped waits until serve, stopped with ts.stop, has ended.
func (ts *testServer) stopped(t *testing.T) chan struct{} {
	t.Helper()
	ts.down = make(chan struct{})
	select {
	case err := <-ts.done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop within a minute")
	}
	close(ts.down)
	return ts.down
}

func startTestServer(t *testing.T, gates ...*browserGate) *testServer {
	t.Helper()
	return startTestServerHooks(t, nil, gates...)
}

func startTestServerHooks(t *testing.T, wrap func(eventlog.Observer) eventlog.Observer, gates ...*browserGate) *testServer {
	t.Helper()
	return startTestServerWith(t, nil, wrap, gates...)
}

// startTestServerWith is startTestServerHooks with flags changed by mod.
func startTestServerWith(t *testing.T, mod func(*serveFlags), wrap func(eventlog.Observer) eventlog.Observer, gates ...*browserGate) *testServer {
	t.Helper()
	return startTestServerEnv(t, nil, mod, wrap, gates...)
}

// startTestServerEnv is startTestServerWith with the environment getenv
// reads (nil: an empty one).
func startTestServerEnv(t *testing.T, getenv func(string) string, mod func(*serveFlags), wrap func(eventlog.Observer) eventlog.Observer, gates ...*browserGate) *testServer {
	t.Helper()
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	dir := t.TempDir()
	ts := &testServer{gates: gates, done: make(chan error, 1), dir: dir}
	ctx, cancel := context.WithCancel(context.Background())
	ts.stop = cancel
	ready := make(chan string, 1)
	hooks := serveHooks{
		store: wrap,
		ready: func(url string) { ready <- url },
		timeline: func(string) []eventlog.Observer {
			ts.mu.Lock()
			defer ts.mu.Unlock()
			if len(ts.gates) == 0 {
				return nil
			}
			g := ts.gates[0]
			ts.gates = ts.gates[1:]
			return []eventlog.Observer{g}
		},
	}
	f := serveFlags{addr: "127.0.0.1:0", store: filepath.Join(dir, "runs.db"), dataDir: filepath.Join(dir, "data"),
		pairs: 4, queue: 16, maxConns: 64, pace: 0}
	if mod != nil {
		mod(&f)
	}
	go func() {
		ts.done <- runServe(ctx, Env{Stdout: &strings.Builder{}, Stderr: &strings.Builder{}, Getenv: getenv}, f, hooks)
	}()
	select {
	case ts.url = <-ready:
	case err := <-ts.done:
		t.Fatalf("serve ended before it listened: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("serve did not listen within a minute")
	}
	t.Cleanup(func() {
		if ts.down != nil {
			<-ts.down
			return
		}
		for _, g := range gates {
			g.open()
		}
		cancel()
		select {
		case err := <-ts.done:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Error("serve did not stop within a minute")
		}
	})
	return ts
}

// outDir is where the browser tests put their screenshots: git-ignored.
func outDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "testoutput", "serve")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

func newBrowser(t *testing.T) (context.Context, context.CancelFunc) {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("!!! SKIPPED: no Chromium at " + chromium + " — the browser tests of `serve` did not run. " +
			"Install it with `apt-get install -y chromium` (.ci/run does).")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1600, 1000),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	require.NoError(t, chromedp.Do(ctx)) // starts the browser
	pid := chromedp.FromContext(ctx).Browser.Process().Pid
	ctx, tcancel := context.WithTimeout(ctx, 3*time.Minute)
	return ctx, func() {
		tcancel()
		cancel()
		acancel()
		// The allocator waits for the browser; by now it is gone.
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "chromium (pid %d) outlived the test", pid)
	}
}

func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(outDir(t), name), buf, 0o644))
}

// waitJS polls a JavaScript expression until it is true, within the
// browser context's deadline.
func waitJS(ctx context.Context, expr string) error {
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(time.Minute)))
	return err
}

func seqsOf(t *testing.T, ctx context.Context) []int {
	t.Helper()
	seqs, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`window.spiceView ? window.spiceView.seqs : []`))
	require.NoError(t, err)
	return seqs
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err)
	return v
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Text(sel))
	require.NoError(t, err)
	return v
}

func requireRun(t *testing.T, seqs []int, n int) {
	t.Helper()
	require.Len(t, seqs, n)
	for i, s := range seqs {
		require.Equal(t, i+1, s, "the page shows every sequence once, in order")
	}
}

// TestS2_BrowserWatchesTheBuiltinPair drives Chromium against a real
// serve: start the built-in pair from the page, see both lanes fill and
// the handoffs appear, reload mid-pair and see the timeline go on without
// a duplicate or gap, then cancel a second pair from the page.
func TestS2_BrowserWatchesTheBuiltinPair(t *testing.T) {
	// The first pair is held after event 40 (the reviewer's first run,
	// after the first handoff), the second after event 10.
	first, second := newGate(40), newGate(10)
	ts := startTestServer(t, first, second)
	ctx, cancel := newBrowser(t)
	defer cancel()

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(ts.url+"/"),
		chromedp.WaitVisible(`#start`),
	))
	require.NoError(t, waitJS(ctx, `document.querySelectorAll('#example option').length >= 2 && document.getElementById('spec').value.includes('builtin-review')`))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#start`)))
	<-first.reached
	require.NoError(t, waitJS(ctx, `document.body.dataset.lastSeq === "40"`))
	lanes := [2]int{
		eval[int](t, ctx, `[...document.querySelectorAll('#timeline .block')].filter(n => n.style.gridColumn.startsWith('1') && !n.style.gridColumn.includes('/')).length`),
		eval[int](t, ctx, `[...document.querySelectorAll('#timeline .block')].filter(n => n.style.gridColumn.startsWith('2')).length`),
	}
	handoffs := eval[int](t, ctx, `document.querySelectorAll('#timeline .handoff').length`)
	require.Positive(t, lanes[0], "the writer's lane has blocks")
	require.Positive(t, lanes[1], "the reviewer's lane has blocks")
	require.Equal(t, 1, handoffs)
	requireRun(t, seqsOf(t, ctx), 40)
	// The raw JSON of a clicked event.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#timeline .handoff`)))
	raw := text(t, ctx, `#raw-json`)
	require.Contains(t, raw, `"kind": "pair.handoff"`)
	shot(t, ctx, "1-mid-pair.png")

	// Reload while the pair is held, then let it go on.
	require.NoError(t, chromedp.Do(ctx, chromedp.Reload()))
	require.NoError(t, waitJS(ctx, `document.body.dataset.lastSeq === "40"`))
	requireRun(t, seqsOf(t, ctx), 40)
	shot(t, ctx, "2-reloaded.png")
	first.open()
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined && document.getElementById('pair-state').textContent === 'completed'`))
	seqs := seqsOf(t, ctx)
	requireRun(t, seqs, len(seqs))
	gap := eval[bool](t, ctx, `document.body.dataset.gap !== undefined`)
	handoffs = eval[int](t, ctx, `document.querySelectorAll('#timeline .handoff').length`)
	terminal := text(t, ctx, `#timeline .terminal`)
	require.False(t, gap)
	require.Equal(t, 3, handoffs)
	require.Contains(t, terminal, "pair.completed · reason approved")
	require.NoError(t, waitJS(ctx, `document.querySelector('#pairs .pair-item.current .state')?.textContent === 'completed'`))
	shot(t, ctx, "3-completed.png")

	// A second pair, cancelled from the page.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/")))
	require.NoError(t, waitJS(ctx, `document.getElementById('spec').value.includes('builtin-review')`))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#start`)))
	<-second.reached
	require.NoError(t, waitJS(ctx, `document.body.dataset.lastSeq === "10" && !document.getElementById('cancel').disabled`))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#cancel`)))
	second.open()
	require.NoError(t, waitJS(ctx, `document.getElementById('pair-state').textContent === 'cancelled' && document.body.dataset.streamEnded !== undefined`))
	terminal = text(t, ctx, `#timeline .terminal`)
	require.Contains(t, terminal, "pair.cancelled · reason cancelled")
	seqs = seqsOf(t, ctx)
	requireRun(t, seqs, len(seqs))
	require.NoError(t, waitJS(ctx, `document.querySelector('#pairs .pair-item.current .state')?.textContent === 'cancelled'`))
	shot(t, ctx, "4-cancelled.png")
}

// TestS2_BrowserShowsModelTextAsText: a model answer that is HTML is shown
// as its characters, and runs nothing.
func TestS2_BrowserShowsModelTextAsText(t *testing.T) {
	ts := startTestServer(t)
	ctx, cancel := newBrowser(t)
	defer cancel()
	payload := `<img src=x onerror="window.__xss=1"><script>window.__xss=2</script><b>bold?</b>`
	specYAML := fmt.Sprintf(`version: 1
name: untrusted-text
pattern: relay
workers:
  - role: writer
    provider: scripted
    script:
      - text: %s
  - role: reviewer
    provider: scripted
    script:
      - text: %s
`, strconv.Quote(payload), strconv.Quote("Reviewed: "+payload))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(ts.url+"/"),
		chromedp.WaitVisible(`#start`),
	))
	require.NoError(t, waitJS(ctx, `document.querySelectorAll('#example option').length >= 2`))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetValue(`#example`, ""),
		chromedp.SetValue(`#spec`, specYAML),
		chromedp.Click(`#start`),
	))
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined`))
	shown := eval[string](t, ctx, `[...document.querySelectorAll('#timeline .text-body')].map(n => n.textContent).join("\n")`)
	imgs := eval[int](t, ctx, `document.querySelectorAll('#timeline img, #timeline script, #timeline b').length`)
	bolds := eval[int](t, ctx, `document.querySelectorAll('b').length`)
	xss := eval[bool](t, ctx, `window.__xss !== undefined`)
	require.Contains(t, shown, `<img src=x onerror="window.__xss=1">`)
	require.Zero(t, imgs)
	require.Zero(t, bolds)
	require.False(t, xss, "model text ran as code")
	shot(t, ctx, "5-untrusted-text.png")
}
