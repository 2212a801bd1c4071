package devloop

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
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
