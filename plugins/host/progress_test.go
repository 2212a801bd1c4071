package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/tool"
)

type countReporter struct{ n atomic.Int64 }

func (r *countReporter) Report(context.Context, tool.Progress) error { r.n.Add(1); return nil }

// More progress messages in one call than the bound is a protocol
// violation; no more than the bound reach the reporter.
func TestP5_ProgressCountIsBounded(t *testing.T) {
	cfg := config(t, fixtureV1, "progress_flood")
	cfg.MaxProgress = 50
	p := launch(t, cfg)
	r := &countReporter{}
	_, err := toolNamed(t, p, "echo").Execute(t.Context(), call(t, "c1", "echo", `{"text":"x"}`), r)
	ee := execErr(t, err)
	require.Equal(t, CodeProtocolViolation, ee.Problem().Code())
	require.Equal(t, tool.Definitive, ee.Outcome(), "a read-only call")
	require.Equal(t, int64(50), r.n.Load())
}

// slowReporter takes d for every report and ignores its context: a
// consumer slower than the plugin.
type slowReporter struct {
	d time.Duration
	n atomic.Int64
}

func (r *slowReporter) Report(context.Context, tool.Progress) error {
	r.n.Add(1)
	t := time.NewTimer(r.d)
	<-t.C
	return nil
}

// A slow consumer of progress cannot stretch a call past its time bound:
// the call ends within CallTimeout + CancelGrace and one report.
func TestP5_SlowProgressConsumerCannotStretchTheCall(t *testing.T) {
	cfg := config(t, fixtureV1, "")
	cfg.CallTimeout, cfg.CancelGrace = 300*time.Millisecond, 200*time.Millisecond
	p := launch(t, cfg)
	r := &slowReporter{d: 100 * time.Millisecond}
	start := time.Now()
	_, err := toolNamed(t, p, "progress").Execute(t.Context(), call(t, "c1", "progress", `{"count":100}`), r)
	elapsed := time.Since(start)
	ee := execErr(t, err)
	require.Equal(t, CodeTimeout, ee.Problem().Code())
	// 100 reports take 10 s; the bound and one report take 0.6 s.
	require.Less(t, elapsed, cfg.CallTimeout+cfg.CancelGrace+r.d+3*time.Second, "the call's bound holds")
	require.Less(t, r.n.Load(), int64(100))
}

// A mutating call whose plugin reported progress has been read: an
// UNAUTHENTICATED end after it is uncertain, not definitive.
func TestP4_UnauthenticatedAfterProgressIsUncertain(t *testing.T) {
	p := launch(t, config(t, fixtureV1, "progress_then_unauthenticated"))
	out := filepath.Join(t.TempDir(), "x")
	_, err := toolNamed(t, p, "write").Execute(t.Context(), call(t, "c1", "write", fmt.Sprintf(`{"path":%q,"content":"x"}`, out)), &countReporter{})
	ee := execErr(t, err)
	require.Equal(t, tool.Uncertain, ee.Outcome())
	_, err = os.Stat(out)
	require.NoError(t, err, "the fixture did write: the request was read")
}
