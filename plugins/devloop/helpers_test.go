package devloop

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/plugins/host"
	"github.com/spice-orch/spice-orch/proctree"
)

// pluginDir makes a plugin folder named devplug under a new temporary
// folder, with the source of version (broken or not).
func pluginDir(t testing.TB, version, mode string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "devplug")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for n, b := range moduleFiles {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	save(t, dir, "main.go", pluginSource(version, mode))
	return dir
}

// save writes a file as editors do: a hidden temporary file renamed over
// it, which the loop sees as one change.
func save(t testing.TB, dir, name, content string) {
	t.Helper()
	tmp := filepath.Join(dir, filepath.Dir(name), "."+filepath.Base(name)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// clock is the debounce timer of the tests: its timers fire when the
// test says so, never on their own.
type clock struct {
	mu    sync.Mutex
	armed []chan time.Time
}

func (c *clock) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	c.armed = append(c.armed, ch)
	c.mu.Unlock()
	return ch
}

// fire ends the debounce period of every timer armed so far.
func (c *clock) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.armed {
		ch <- time.Time{}
	}
	c.armed = nil
}

type harness struct {
	loop    *Loop
	clock   *clock
	reports chan Report
	dir     string
	stop    func()
}

// start runs a loop over dir with the test clock until the test ends.
func start(t *testing.T, dir string, edit func(*Config)) *harness {
	t.Helper()
	h := &harness{clock: &clock{}, reports: make(chan Report, 1000), dir: dir}
	cfg := Config{Go: goCmd, Dir: dir, Out: filepath.Join(filepath.Dir(dir), "builds"),
		After: h.clock.After, OnReport: func(r Report) { h.reports <- r }}
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l, err := New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h.loop = l
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(h.stop)
	return h
}

// next returns the next report of one of kinds, skipping others into
// seen, within a bound.
func (h *harness) next(t *testing.T, seen *[]Report, kinds ...ReportKind) Report {
	t.Helper()
	timeout := time.NewTimer(3 * time.Minute)
	defer timeout.Stop()
	for {
		select {
		case r := <-h.reports:
			if seen != nil {
				*seen = append(*seen, r)
			}
			for _, k := range kinds {
				if r.Kind == k {
					return r
				}
			}
		case <-timeout.C:
			t.Fatalf("no %v report", kinds)
		}
	}
}

// edit saves main.go and waits until the loop saw the change (its
// debounce timer then armed), without firing the timer.
func (h *harness) edit(t *testing.T, version, mode string) {
	t.Helper()
	save(t, h.dir, "main.go", pluginSource(version, mode))
	if r := h.next(t, nil, Changed); r.File != "main.go" {
		t.Fatalf("changed %q, want main.go", r.File)
	}
}

// ended is a loop whose generations the test follows to their end: of
// the Go plugin or of the Python fixture alike.
type ended struct {
	*harness
	drained chan string // each generation that drained or was forced to
}

// startEnded starts a loop over dir with startLoop (start or
// startPython), the plugin's processes given env, and waits for its first
// generation to be active.
func startEnded(t *testing.T, startLoop func(*testing.T, string, func(*Config)) *harness, dir, env string) *ended {
	t.Helper()
	e := &ended{drained: make(chan string, 16)}
	e.harness = startLoop(t, dir, func(c *Config) {
		c.Plugin.Env = []string{env}
		c.OnEvent = func(ev host.Event) {
			if ev.Kind == host.EventDrained || ev.Kind == host.EventForced {
				e.drained <- ev.Generation
			}
		}
	})
	require.Equal(t, Activated, e.next(t, nil, Activated, Failed).Kind)
	return e
}

// tree returns the processes of the generation l leased: its plugin and
// the plugin's descendants, of which there must be one at least (what
// names it).
func (e *ended) tree(t *testing.T, l *plan.Lease, what string) []proctree.Proc {
	t.Helper()
	gp, ok := e.loop.Source().Plan(l.Plan().ID())
	require.True(t, ok)
	pid := gp.Generations[0].PID
	self, ok := proctree.Of(pid)
	require.True(t, ok)
	tree := append(proctree.Descendants(pid), self)
	require.GreaterOrEqual(t, len(tree), 2, "the plugin and its "+what)
	return tree
}

// requireDrained waits, within a bound, for the next generation to end
// and checks it is gen.
func (e *ended) requireDrained(t *testing.T, gen string) {
	t.Helper()
	select {
	case g := <-e.drained:
		require.Equal(t, gen, g)
	case <-time.After(time.Minute):
		t.Fatal(gen + " did not drain")
	}
}

func count(rs []Report, k ReportKind) int {
	n := 0
	for _, r := range rs {
		if r.Kind == k {
			n++
		}
	}
	return n
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
