package toolkit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// fake is a tool whose behaviour a test sets; the zero behaviour conforms.
type fake struct {
	def      tool.Definition
	exec     func(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error)
	defs     atomic.Int64
	unstable bool
}

func newFake(t *testing.T, replay tool.Replay, exec func(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error)) *fake {
	t.Helper()
	effect := tool.Mutating
	if replay == tool.Safe {
		effect = tool.ReadOnly
	}
	def, err := tool.NewDefinition(tool.DefinitionConfig{Name: "kit.fake", Description: "A fake.",
		Schema: json.RawMessage(`{"type":"object"}`), Effect: effect, Replay: replay})
	require.NoError(t, err)
	return &fake{def: def, exec: exec}
}

func (f *fake) Definition() tool.Definition {
	if f.unstable {
		def, _ := tool.NewDefinition(tool.DefinitionConfig{Name: "kit.fake", Description: fmt.Sprint("A fake, call ", f.defs.Add(1)),
			Schema: json.RawMessage(`{"type":"object"}`), Effect: f.def.Effect(), Replay: f.def.Replay()})
		return def
	}
	return f.def
}

func (f *fake) Execute(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
	if f.exec != nil {
		return f.exec(ctx, call, r)
	}
	if err := ctx.Err(); err != nil {
		return tool.Result{}, tool.Canceled(call.ID(), err)
	}
	if strings.Contains(call.ArgumentsString(), "bad") {
		return tool.NewProblemResult(call.ID(), problem.Must("invalid_arguments", "bad"), "")
	}
	if strings.Contains(call.ArgumentsString(), "slow") {
		<-ctx.Done()
		return tool.Result{}, tool.Canceled(call.ID(), ctx.Err())
	}
	return tool.NewResult(call.ID(), "ok")
}

var (
	valid   = json.RawMessage(`{"x":1}`)
	invalid = json.RawMessage(`{"x":"bad"}`)
	slow    = json.RawMessage(`{"x":"slow"}`)
)

func fast() options { return Config{Prompt: 200 * time.Millisecond, Wait: 2 * time.Second}.options() }

func TestRunAgainstAConformingFake(t *testing.T) {
	Run(t, Config{
		New:   func(t *testing.T) tool.Tool { return newFake(t, tool.Idempotent, nil) },
		Valid: valid, Invalid: invalid, Slow: slow,
	})
}

func requireCaught(t *testing.T, err error, want string) {
	t.Helper()
	require.Error(t, err, "the kit must catch this tool")
	require.Contains(t, err.Error(), want)
}

func TestKitCatchesResultAndError(t *testing.T) {
	f := newFake(t, tool.Idempotent, func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		res, _ := tool.NewResult(call.ID(), "ok")
		return res, tool.Fail(call.ID(), problem.Must("io_error", "x"))
	})
	requireCaught(t, checkValid(f, valid, fast()), "K7: Execute returned a result and an error")
}

func TestKitCatchesWrappedAndUntypedErrors(t *testing.T) {
	wrapped := newFake(t, tool.Idempotent, func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		return tool.Result{}, fmt.Errorf("write: %w", tool.Fail(call.ID(), problem.Must("io_error", "x")))
	})
	requireCaught(t, checkValid(wrapped, valid, fast()), "not a direct *tool.ExecutionError")
	untyped := newFake(t, tool.Idempotent, func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
		return tool.Result{}, fmt.Errorf("disk full")
	})
	requireCaught(t, checkValid(untyped, valid, fast()), "not a direct *tool.ExecutionError")
}

func TestKitCatchesWrongCallID(t *testing.T) {
	f := newFake(t, tool.Idempotent, func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
		return tool.NewResult("call-other", "ok")
	})
	requireCaught(t, checkValid(f, valid, fast()), "K7: the result answers call")
}

func TestKitCatchesRetryOfAnUnsafeTool(t *testing.T) {
	f := newFake(t, tool.Unsafe, func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		return tool.Result{}, tool.Retryable(call.ID(), problem.Must("busy", "x"), 0)
	})
	requireCaught(t, checkConcurrent(f, valid, fast()), "allows a retry of a replay-unsafe tool")
}

func TestKitCatchesProblemForAValidCallAndErrorForAnInvalidOne(t *testing.T) {
	f := newFake(t, tool.Idempotent, func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		return tool.Result{}, tool.Fail(call.ID(), problem.Must("invalid_arguments", "x"))
	})
	requireCaught(t, checkInvalid(f, invalid, fast()), "is a problem result, not an execution error")
	requireCaught(t, checkValid(f, valid, fast()), "the Valid call failed")
}

func TestKitCatchesUnstableDefinition(t *testing.T) {
	f := newFake(t, tool.Idempotent, nil)
	f.unstable = true
	requireCaught(t, checkDefinition(f, valid, fast()), "K5:")
}

func TestKitCatchesIgnoredCancellation(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	f := newFake(t, tool.Idempotent, func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		<-release
		return tool.NewResult(call.ID(), "ok")
	})
	requireCaught(t, checkCancelledWhileRunning(f, slow, fast()), "K8: the call did not return within")
}

func TestKitCatchesNonCancellationErrorAfterCancel(t *testing.T) {
	f := newFake(t, tool.Idempotent, func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		return tool.Result{}, tool.Fail(call.ID(), problem.Must("io_error", "x"))
	})
	requireCaught(t, checkCancelledBefore(f, valid, fast()), "which is not context.Canceled")
}

func TestKitCatchesReportsAfterReturn(t *testing.T) {
	release, done := make(chan struct{}), make(chan struct{})
	f := newFake(t, tool.Idempotent, func(_ context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
		go func() {
			defer close(done)
			<-release
			p, _ := tool.NewProgress(call.ID(), "late")
			_ = r.Report(context.Background(), p)
		}()
		return tool.NewResult(call.ID(), "ok")
	})
	err := checkReporter(f, valid, fast())
	close(release)
	<-done
	requireCaught(t, err, "K9: a goroutine of the tool outlived Execute")
}

func TestKitCatchesPanics(t *testing.T) {
	f := newFake(t, tool.Idempotent, func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
		panic("boom")
	})
	requireCaught(t, checkValid(f, valid, fast()), "K7: Execute panicked")
}
