package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/tool"
)

// maxReporter records the most calls in flight whenever a call reports
// progress.
type maxReporter struct {
	p   *Plugin
	max atomic.Int64
}

func (r *maxReporter) Report(context.Context, tool.Progress) error {
	n := int64(r.p.InFlight())
	for {
		m := r.max.Load()
		if n <= m || r.max.CompareAndSwap(m, n) {
			return nil
		}
	}
}

// The manifest's max_concurrent_calls, smaller than the host's, holds.
func TestP5_ManifestConcurrencyBoundHolds(t *testing.T) {
	p := launch(t, config(t, fixtureV1, "bounds_small"))
	require.Equal(t, 2, p.Manifest().Bounds.MaxConcurrentCalls)
	slow := toolNamed(t, p, "slow")
	r := &maxReporter{p: p}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := slow.Execute(t.Context(), call(t, fmt.Sprintf("c%d", i), "slow", `{"millis":150}`), r)
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, r.max.Load(), int64(2), "calls in flight at once")
	require.Positive(t, r.max.Load())
}

// A manifest advertising larger bounds than the host's keeps the host's,
// and a request over the host's bound is refused before it is sent.
func TestP5_LargerManifestBoundsKeepTheHosts(t *testing.T) {
	cfg := config(t, fixtureV1, "bounds_large")
	cfg.MaxRequestBytes, cfg.MaxResponseBytes, cfg.MaxConcurrentCalls, cfg.CallTimeout = 4096, 8192, 3, 7*time.Second
	p := launch(t, cfg)
	require.Equal(t, Bounds{MaxRequestBytes: 4096, MaxResponseBytes: 8192, MaxConcurrentCalls: 3, CallTimeout: 7 * time.Second},
		p.Manifest().Bounds)
	out := filepath.Join(t.TempDir(), "written")
	args := fmt.Sprintf(`{"path":%q,"content":%q}`, out, strings.Repeat("x", 5000))
	_, err := toolNamed(t, p, "write").Execute(t.Context(), call(t, "c1", "write", args), nil)
	ee := execErr(t, err)
	require.Equal(t, CodeRequestTooLarge, ee.Problem().Code())
	require.Equal(t, tool.Definitive, ee.Outcome())
	_, err = os.Stat(out)
	require.ErrorIs(t, err, os.ErrNotExist, "the plugin never got the request")
	// A response over the host's bound is a violation, though the
	// plugin's bound allows it.
	_, err = toolNamed(t, p, "blob").Execute(t.Context(), call(t, "c2", "blob", `{"bytes":9000}`), nil)
	require.Equal(t, CodeProtocolViolation, execErr(t, err).Problem().Code())
}
