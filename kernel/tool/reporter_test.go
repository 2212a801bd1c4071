package tool_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/tool"
)

// failingAfterReport is a tool that reports once and then returns out.
func failingAfterReport(t *testing.T, d tool.Definition, out func(tool.Call) error) *fakeTool {
	return newTool(d, func(ctx context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
		_ = r.Report(ctx, progress(t, c.ID(), "halfway")) // the tool ignores the reporter's error
		return tool.Result{}, out(c)
	})
}

func TestK9_ReporterFailureStructure(t *testing.T) {
	// The reporter fails with context.Canceled; the execution outcome is a
	// plain definitive failure. Cancellation must follow the execution.
	rec := &recorder{err: context.Canceled}
	var sent error
	d := dispatcher(t, failingAfterReport(t, readOnly(t, "read"), func(c tool.Call) error {
		sent = tool.Fail(c.ID(), prob("io"))
		return sent
	}))
	r, err := d.Dispatch(context.Background(), call(t, "c1", "read"), rec)
	require.True(t, r.IsZero())
	var f *tool.DispatchFailure
	require.ErrorAs(t, err, &f)
	require.Same(t, sent.(*tool.ExecutionError), f.Execution())
	require.Same(t, sent.(*tool.ExecutionError), errors.Unwrap(err).(*tool.ExecutionError), "ordinary unwrapping reaches only the execution error")
	require.Same(t, sent.(*tool.ExecutionError), executionError(t, err))
	require.NotErrorIs(t, err, context.Canceled, "the reporter's cancellation must not classify the call")
	require.ErrorIs(t, f.ReporterFailure(), context.Canceled, "but it is inspectable explicitly")
	require.Equal(t, 1, rec.Count())
	require.Contains(t, err.Error(), "io")
}

func TestK9_ReporterFailureKeepsExecutionCancellation(t *testing.T) {
	reporterErr := errors.New("observer durability lost")
	rec := &recorder{err: reporterErr}
	d := dispatcher(t, failingAfterReport(t, readOnly(t, "read"), func(c tool.Call) error {
		return tool.Canceled(c.ID(), context.Canceled)
	}))
	_, err := d.Dispatch(context.Background(), call(t, "c1", "read"), rec)
	var f *tool.DispatchFailure
	require.ErrorAs(t, err, &f)
	require.ErrorIs(t, err, context.Canceled, "classified by the execution outcome")
	require.NotErrorIs(t, err, reporterErr, "the reporter failure is not in the unwrap chain")
	require.Same(t, reporterErr, f.ReporterFailure())
	require.NotContains(t, err.Error(), "durability", "the reporter's text is not printed")
}

func TestK9_OnlyFirstReporterFailureKept(t *testing.T) {
	first := errors.New("first")
	rec := &recorder{err: first}
	d := dispatcher(t, newTool(readOnly(t, "read"), func(ctx context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
		for range 100 {
			_ = r.Report(ctx, progress(t, c.ID(), "tick"))
			rec.mu.Lock()
			rec.err = errors.New("later")
			rec.mu.Unlock()
		}
		return tool.Result{}, tool.Fail(c.ID(), prob("io"))
	}))
	_, err := d.Dispatch(context.Background(), call(t, "c1", "read"), rec)
	var f *tool.DispatchFailure
	require.ErrorAs(t, err, &f)
	require.Same(t, first, f.ReporterFailure())
}

func TestK9_ResultWinsOverReporterFailure(t *testing.T) {
	rec := &recorder{err: errors.New("observer down")}
	d := dispatcher(t, newTool(readOnly(t, "read"), func(ctx context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
		require.Error(t, r.Report(ctx, progress(t, c.ID(), "step")), "the tool learns about the failure")
		return tool.NewResult(c.ID(), "done")
	}))
	res, err := d.Dispatch(context.Background(), call(t, "c1", "read"), rec)
	require.NoError(t, err)
	require.Equal(t, "done", res.Content())
}

func TestK9_ReporterFailureWithDispatcherBuiltError(t *testing.T) {
	rec := &recorder{err: errors.New("observer down")}
	d := dispatcher(t, newTool(readOnly(t, "read"), func(ctx context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
		_ = r.Report(ctx, progress(t, c.ID(), "step"))
		panic("boom")
	}))
	_, err := d.Dispatch(context.Background(), call(t, "c1", "read"), rec)
	var f *tool.DispatchFailure
	require.ErrorAs(t, err, &f)
	require.ErrorIs(t, err, tool.ErrPanic)
	require.Equal(t, "tool_panic", f.Execution().Problem().Code())
}

func TestK9_ForeignProgressRejected(t *testing.T) {
	rec := &recorder{}
	d := dispatcher(t, newTool(readOnly(t, "read"), func(ctx context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
		require.ErrorIs(t, r.Report(ctx, progress(t, "other-call", "sneaky")), tool.ErrForeignProgress)
		require.ErrorIs(t, r.Report(ctx, tool.Progress{}), tool.ErrForeignProgress)
		require.NoError(t, r.Report(ctx, progress(t, c.ID(), "mine")))
		return tool.NewResult(c.ID(), "done")
	}))
	_, err := d.Dispatch(context.Background(), call(t, "c1", "read"), rec)
	require.NoError(t, err, "a rejected report is not a reporter failure")
	require.Len(t, rec.got, 1)
	require.Equal(t, "mine", rec.got[0].Message())
}

func TestK9_ReporterUnusableAfterReturn(t *testing.T) {
	t.Run("stashed", func(t *testing.T) {
		rec := &recorder{}
		var stash tool.Reporter
		d := dispatcher(t, newTool(readOnly(t, "read"), func(ctx context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
			stash = r
			require.NoError(t, r.Report(ctx, progress(t, c.ID(), "during")))
			return tool.NewResult(c.ID(), "done")
		}))
		_, err := d.Dispatch(context.Background(), call(t, "c1", "read"), rec)
		require.NoError(t, err)
		require.ErrorIs(t, stash.Report(context.Background(), progress(t, "c1", "after")), tool.ErrReporterClosed)
		// A later call must not revive the stashed reporter either.
		_, err = d.Dispatch(context.Background(), call(t, "c1", "read"), rec)
		require.NoError(t, err)
		require.ErrorIs(t, stash.Report(context.Background(), progress(t, "c1", "after")), tool.ErrReporterClosed)
		require.Equal(t, 2, rec.Count(), "only the two in-call reports were forwarded")
	})
	t.Run("goroutine", func(t *testing.T) {
		rec := &recorder{}
		release := make(chan struct{})
		done := make(chan error, 1)
		d := dispatcher(t, newTool(readOnly(t, "read"), func(ctx context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
			go func() {
				<-release
				done <- r.Report(context.Background(), progress(t, c.ID(), "late"))
			}()
			return tool.NewResult(c.ID(), "done")
		}))
		_, err := d.Dispatch(context.Background(), call(t, "c1", "read"), rec)
		require.NoError(t, err)
		close(release)
		require.ErrorIs(t, <-done, tool.ErrReporterClosed)
		require.Zero(t, rec.Count())
	})
	t.Run("racing the return", func(t *testing.T) {
		// Goroutines hammer the reporter while Execute returns. Nothing may
		// be forwarded once Dispatch has returned.
		rec := &recorder{}
		var wg sync.WaitGroup
		started := make(chan struct{})
		d := dispatcher(t, newTool(readOnly(t, "read"), func(ctx context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Bounded so that a broken close fails the test instead
					// of hanging it.
					for i := range 200_000 {
						if i == 1 {
							started <- struct{}{}
						}
						if errors.Is(r.Report(context.Background(), progress(t, c.ID(), "tick")), tool.ErrReporterClosed) {
							return
						}
					}
				}()
			}
			for range 4 {
				<-started
			}
			return tool.NewResult(c.ID(), "done")
		}))
		_, err := d.Dispatch(context.Background(), call(t, "c1", "read"), rec)
		require.NoError(t, err)
		atReturn := rec.Count()
		require.GreaterOrEqual(t, atReturn, 4)
		wg.Wait()
		require.Equal(t, atReturn, rec.Count(), "no report was forwarded after Dispatch returned")
	})
}

func TestK9_ReporterPanicContained(t *testing.T) {
	rec := &recorder{panic: true}
	d := dispatcher(t, newTool(readOnly(t, "read"), func(ctx context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
		require.ErrorIs(t, r.Report(ctx, progress(t, c.ID(), "x")), tool.ErrReporterPanic)
		return tool.Result{}, tool.Fail(c.ID(), prob("io"))
	}))
	_, err := d.Dispatch(context.Background(), call(t, "c1", "read"), rec)
	var f *tool.DispatchFailure
	require.ErrorAs(t, err, &f)
	require.ErrorIs(t, f.ReporterFailure(), tool.ErrReporterPanic)
	require.Equal(t, "io", f.Execution().Problem().Code(), "the tool's outcome is untouched")
}

func TestK9_NilReporterAccepted(t *testing.T) {
	d := dispatcher(t, newTool(readOnly(t, "read"), func(ctx context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
		require.NotNil(t, r)
		require.NoError(t, r.Report(ctx, progress(t, c.ID(), "x")))
		return tool.NewResult(c.ID(), "done")
	}))
	_, err := d.Dispatch(context.Background(), call(t, "c1", "read"), nil)
	require.NoError(t, err)
}

func TestK7_DispatchFailureReturnedByToolIsRejected(t *testing.T) {
	// A tool that forwards another dispatch's structured failure returns a
	// wrapper, not a direct execution error.
	inner := dispatcher(t, failingAfterReport(t, readOnly(t, "read"), func(c tool.Call) error {
		return tool.Fail(c.ID(), prob("io"))
	}))
	outer := dispatcher(t, newTool(readOnly(t, "proxy"), func(ctx context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
		ic, err := tool.NewCall(c.ID(), "read", nil)
		if err != nil {
			return tool.Result{}, err
		}
		return inner.Dispatch(ctx, ic, &recorder{err: errors.New("down")})
	}))
	_, err := outer.Dispatch(context.Background(), call(t, "c1", "proxy"), nil)
	var pe *tool.ProtocolError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, tool.IndirectError, pe.Violation())
}
