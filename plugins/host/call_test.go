package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/tool"
)

func toolNamed(t testing.TB, p *Plugin, name string) tool.Tool {
	t.Helper()
	for _, tl := range p.Tools() {
		if tl.Definition().Name() == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

func TestP4_PluginToolBehindTheCanonicalDispatcher(t *testing.T) {
	p := launch(t, config(t, fixtureV1, ""))
	d := dispatcher(t, p.Tools()...)
	res, err := d.Dispatch(t.Context(), call(t, "c1", "echo", `{"text":"hello"}`), nil)
	require.NoError(t, err)
	require.Equal(t, "hello", res.Content())
	require.Equal(t, "c1", string(res.CallID()))

	// Arguments that do not decode are a model-visible problem.
	res, err = d.Dispatch(t.Context(), call(t, "c2", "echo", `{"text":7}`), nil)
	require.NoError(t, err)
	pr, ok := res.Problem()
	require.True(t, ok)
	require.Equal(t, "invalid_arguments", pr.Code())

	// Progress reaches the caller's reporter.
	rep := progress{msgs: make(chan string, 4)}
	res, err = d.Dispatch(t.Context(), call(t, "c3", "slow", `{"millis":1}`), rep)
	require.NoError(t, err)
	require.Equal(t, "done", res.Content())
	require.Equal(t, "started", <-rep.msgs)
}

func TestP4_MutatingCallWritesOnce(t *testing.T) {
	p := launch(t, config(t, fixtureV1, ""))
	path := filepath.Join(t.TempDir(), "out.txt")
	res, err := dispatcher(t, p.Tools()...).Dispatch(t.Context(), call(t, "w1", "write", `{"path":"`+path+`","content":"abc"}`), nil)
	require.NoError(t, err)
	require.Equal(t, "wrote "+path, res.Content())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "abc", string(b))
}

func TestP4_CrashDuringMutatingCallIsUncertainAndNotRetried(t *testing.T) {
	p := launch(t, config(t, fixtureV1, "crash"))
	d := dispatcher(t, p.Tools()...)
	path := filepath.Join(t.TempDir(), "out.txt")
	_, err := d.Dispatch(t.Context(), call(t, "w1", "write", `{"path":"`+path+`","content":"abc"}`), nil)
	ee := execErr(t, err)
	require.Equal(t, tool.Uncertain, ee.Outcome())
	require.Equal(t, tool.NoRetry, ee.Retry())
	require.Equal(t, CodeFailed, ee.Problem().Code())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "abc", string(b), "the write happened before the crash")
	<-p.Exited()
	// Nothing re-sends a call: the next one is refused before it leaves.
	require.NoError(t, os.Remove(path))
	_, err = d.Dispatch(t.Context(), call(t, "w2", "write", `{"path":"`+path+`","content":"abc"}`), nil)
	ee = execErr(t, err)
	require.Equal(t, tool.Definitive, ee.Outcome())
	require.Equal(t, CodeUnavailable, ee.Problem().Code())
	require.NoFileExists(t, path)
}

func TestP4_ProtocolViolationsAreTypedFailures(t *testing.T) {
	for _, mode := range []string{"wrong_call_id", "two_outcomes", "no_outcome", "empty_outcome"} {
		t.Run(mode, func(t *testing.T) {
			p := launch(t, config(t, fixtureV1, mode))
			d := dispatcher(t, p.Tools()...)
			_, err := d.Dispatch(t.Context(), call(t, "r1", "echo", `{"text":"x"}`), nil)
			ee := execErr(t, err)
			require.Equal(t, CodeProtocolViolation, ee.Problem().Code())
			require.Equal(t, tool.Definitive, ee.Outcome(), "read-only")
			path := filepath.Join(t.TempDir(), "f")
			_, err = d.Dispatch(t.Context(), call(t, "m1", "write", `{"path":"`+path+`","content":""}`), nil)
			ee = execErr(t, err)
			require.Equal(t, CodeProtocolViolation, ee.Problem().Code())
			require.Equal(t, tool.Uncertain, ee.Outcome(), "mutating, after the request was sent")
		})
	}
}

func TestP5_OversizedResponseIsAViolation(t *testing.T) {
	cfg := config(t, fixtureV1, "")
	cfg.MaxResponseBytes = 16 << 10
	p := launch(t, cfg)
	d := dispatcher(t, p.Tools()...)
	_, err := d.Dispatch(t.Context(), call(t, "b1", "blob", `{"bytes":100000}`), nil)
	ee := execErr(t, err)
	require.Equal(t, CodeProtocolViolation, ee.Problem().Code())
	require.Equal(t, tool.Definitive, ee.Outcome())
	// The connection survives: the next call works.
	res, err := d.Dispatch(t.Context(), call(t, "b2", "blob", `{"bytes":10}`), nil)
	require.NoError(t, err)
	require.Len(t, res.Content(), 10)
}

func TestP5_OversizedRequestIsNotSent(t *testing.T) {
	cfg := config(t, fixtureV1, "")
	cfg.MaxRequestBytes = 1024
	p := launch(t, cfg)
	path := filepath.Join(t.TempDir(), "f")
	_, err := dispatcher(t, p.Tools()...).Dispatch(t.Context(),
		call(t, "m1", "write", `{"path":"`+path+`","content":"`+strings.Repeat("x", 2000)+`"}`), nil)
	ee := execErr(t, err)
	require.Equal(t, CodeRequestTooLarge, ee.Problem().Code())
	require.Equal(t, tool.Definitive, ee.Outcome())
	require.NoFileExists(t, path)
}

func TestP5_CallTimeout(t *testing.T) {
	// The deadline reaches the plugin, which reports it; a plugin that
	// ignores it is cut off by the host's own bound.
	for mode, code := range map[string]string{"": "deadline_exceeded", "ignore_cancel": CodeTimeout} {
		t.Run("mode="+mode, func(t *testing.T) {
			cfg := config(t, fixtureV1, mode)
			cfg.CallTimeout = 200 * time.Millisecond
			cfg.CancelGrace = 2 * time.Second
			cfg.ShutdownGrace = 200 * time.Millisecond
			p := launch(t, cfg)
			start := time.Now()
			_, err := dispatcher(t, p.Tools()...).Dispatch(t.Context(), call(t, "s1", "slow", `{"millis":60000}`), nil)
			ee := execErr(t, err)
			require.Equal(t, code, ee.Problem().Code())
			require.Equal(t, tool.Definitive, ee.Outcome())
			require.Less(t, time.Since(start), 10*time.Second)
		})
	}
}

func TestP5_CancellationReachesThePluginAndEndsTheCall(t *testing.T) {
	for _, mode := range []string{"", "ignore_cancel"} {
		t.Run("mode="+mode, func(t *testing.T) {
			cfg := config(t, fixtureV1, mode)
			cfg.ShutdownGrace = 300 * time.Millisecond
			p := launch(t, cfg)
			ctx, cancel := context.WithCancel(t.Context())
			rep := progress{msgs: make(chan string, 1)}
			done := make(chan error, 1)
			go func() {
				_, err := dispatcher(t, p.Tools()...).Dispatch(ctx, call(t, "s1", "slow", `{"millis":60000}`), rep)
				done <- err
			}()
			<-rep.msgs // the call is running in the plugin
			cancel()
			err := <-done
			require.ErrorIs(t, err, context.Canceled)
			require.Equal(t, tool.Definitive, execErr(t, err).Outcome())
		})
	}
}

func TestP7_CloseEndsTheWholeProcessTree(t *testing.T) {
	cfg := config(t, fixtureV1, "grandchild")
	cfg.ShutdownGrace = 500 * time.Millisecond
	p, err := Launch(t.Context(), cfg)
	require.NoError(t, err)
	// The fixture started its grandchild before the handshake line.
	var grandchild int
	for _, pid := range groupMembers(t, p.PID()) {
		if pid != p.PID() {
			grandchild = pid
		}
	}
	require.NotZero(t, grandchild)
	require.True(t, alive(grandchild))
	require.True(t, alive(p.PID()))
	require.NoError(t, p.Close())
	requireGone(t, p.PID())
	requireGone(t, grandchild)
	require.Empty(t, groupMembers(t, p.PID()))
	require.NoError(t, p.Close(), "idempotent")
}

func TestP7_ClosedPluginRefusesCallsDefinitively(t *testing.T) {
	p, err := Launch(t.Context(), config(t, fixtureV1, ""))
	require.NoError(t, err)
	require.NoError(t, p.Close())
	requireGone(t, p.PID())
	_, err = toolNamed(t, p, "write").Execute(t.Context(), call(t, "w1", "write", `{"path":"/nonexistent/x","content":""}`), nil)
	ee := execErr(t, err)
	require.Equal(t, tool.Definitive, ee.Outcome())
	require.Equal(t, CodeUnavailable, ee.Problem().Code())
}
