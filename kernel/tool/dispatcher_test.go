package tool_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

func okTool(d tool.Definition) *fakeTool {
	return newTool(d, func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
		return tool.NewResult(c.ID(), "ok:"+c.Name())
	})
}

func TestK6_DispatcherFreezesDefinitions(t *testing.T) {
	ft := okTool(readOnly(t, "read"))
	d := dispatcher(t, ft)
	before := slices.Collect(d.Definitions())
	require.Equal(t, 1, ft.reads, "Definition is read exactly once")

	// The tool now claims a different contract; the snapshot must not move.
	ft.mu.Lock()
	ft.def = def(t, "read", tool.Mutating, tool.Unsafe, tool.ProcessExecute)
	ft.mu.Unlock()

	require.Equal(t, before, slices.Collect(d.Definitions()))
	got, ok := d.Lookup("read")
	require.True(t, ok)
	require.Equal(t, tool.ReadOnly, got.Effect())
	require.Equal(t, before[0].Fingerprint(), got.Fingerprint())
	_, err := d.Dispatch(context.Background(), call(t, "c1", "read"), nil)
	require.NoError(t, err)
	require.Equal(t, 1, ft.reads, "Dispatch never re-reads Definition")
}

func TestK6_DefinitionsInNameOrder(t *testing.T) {
	d := dispatcher(t, okTool(readOnly(t, "zeta")), okTool(readOnly(t, "alpha")), okTool(readOnly(t, "mid")))
	var names []string
	for def := range d.Definitions() {
		names = append(names, def.Name())
	}
	require.Equal(t, []string{"alpha", "mid", "zeta"}, names)
	require.Equal(t, 3, d.Len())
	// Each name dispatches to its own tool.
	for _, n := range names {
		r, err := d.Dispatch(context.Background(), call(t, "c1", n), nil)
		require.NoError(t, err)
		require.Equal(t, "ok:"+n, r.Content())
	}
}

func TestK6_UnknownToolRejected(t *testing.T) {
	ft := okTool(readOnly(t, "read"))
	d := dispatcher(t, ft)
	_, ok := d.Lookup("write")
	require.False(t, ok)
	r, err := d.Dispatch(context.Background(), call(t, "c1", "write"), nil)
	require.True(t, r.IsZero())
	require.ErrorIs(t, err, tool.ErrUnknownTool)
	require.ErrorIs(t, err, bound.ErrInvalid)
	var be *bound.Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, "tool_call.name", be.Field)
	var ee *tool.ExecutionError
	require.False(t, errors.As(err, &ee), "nothing ran, so there is no execution error")
	require.Zero(t, ft.Runs())

	_, err = d.Dispatch(context.Background(), tool.Call{}, nil)
	require.ErrorIs(t, err, bound.ErrInvalid, "the zero call is rejected")
	require.Zero(t, ft.Runs())
}

type panicDefinition struct{ fakeTool }

func (*panicDefinition) Definition() tool.Definition { panic("definition secret-token") }

func TestK6_ConstructionErrors(t *testing.T) {
	many := make([]tool.Tool, bound.MaxToolsPerPlan+1)
	for i := range many {
		many[i] = okTool(readOnly(t, fmt.Sprintf("t%d", i)))
	}
	cases := []struct {
		name  string
		cfg   tool.DispatcherConfig
		field string
		rule  bound.Rule
	}{
		{"duplicate names", tool.DispatcherConfig{Tools: []tool.Tool{okTool(readOnly(t, "a")), okTool(readOnly(t, "b")), okTool(mutating(t, "a", tool.Unsafe))}}, "dispatcher.tools", bound.Conflict},
		{"nil tool", tool.DispatcherConfig{Tools: []tool.Tool{okTool(readOnly(t, "a")), nil}}, "dispatcher.tools[1]", bound.Required},
		{"zero definition", tool.DispatcherConfig{Tools: []tool.Tool{&fakeTool{}}}, "dispatcher.tools[0]", bound.Malformed},
		{"panicking definition", tool.DispatcherConfig{Tools: []tool.Tool{&panicDefinition{}}}, "dispatcher.tools[0]", bound.Malformed},
		{"too many tools", tool.DispatcherConfig{Tools: many}, "dispatcher.tools", bound.TooMany},
		{"nil guard", tool.DispatcherConfig{Guards: []tool.Guard{nil}}, "dispatcher.guards[0]", bound.Required},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := tool.NewDispatcher(tc.cfg)
			require.Nil(t, d)
			var be *bound.Error
			require.ErrorAs(t, err, &be)
			require.Equal(t, tc.field, be.Field)
			require.Equal(t, tc.rule, be.Rule)
			require.NotContains(t, err.Error(), "secret-token")
		})
	}
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: many[:bound.MaxToolsPerPlan]})
	require.NoError(t, err, "exactly the bound is fine")
	require.Equal(t, bound.MaxToolsPerPlan, d.Len())
	empty, err := tool.NewDispatcher(tool.DispatcherConfig{})
	require.NoError(t, err, "a dispatcher without tools serves text-only runs")
	_, err = empty.Dispatch(context.Background(), call(t, "c1", "read"), nil)
	require.ErrorIs(t, err, tool.ErrUnknownTool)
}

func TestK7_ValidResultPassesThrough(t *testing.T) {
	d := dispatcher(t, okTool(readOnly(t, "read")))
	r, err := d.Dispatch(context.Background(), call(t, "c1", "read"), nil)
	require.NoError(t, err)
	require.Equal(t, result(t, "c1", "ok:read"), r)
}

func TestK7_ProblemResultPassesThrough(t *testing.T) {
	d := dispatcher(t, newTool(readOnly(t, "read"), func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
		return tool.NewProblemResult(c.ID(), prob("not_found"), "no such file")
	}))
	r, err := d.Dispatch(context.Background(), call(t, "c1", "read"), nil)
	require.NoError(t, err, "a model-visible problem is a result, not a failure")
	p, ok := r.Problem()
	require.True(t, ok)
	require.Equal(t, "not_found", p.Code())
	require.Equal(t, "no such file", r.Content())
}

func TestK7_ExecutionErrorPassesThrough(t *testing.T) {
	var sent error
	d := dispatcher(t,
		newTool(mutating(t, "put", tool.Idempotent), func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
			sent = tool.Retryable(c.ID(), prob("busy"), 0)
			return tool.Result{}, sent
		}),
		newTool(mutating(t, "exec", tool.Unsafe), func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
			sent = tool.FailUncertain(c.ID(), prob("lost_connection"), nil)
			return tool.Result{}, sent
		}),
	)
	for _, name := range []string{"put", "exec"} {
		r, err := d.Dispatch(context.Background(), call(t, "c1", name), nil)
		require.True(t, r.IsZero())
		require.Same(t, sent.(*tool.ExecutionError), err.(*tool.ExecutionError), "returned directly, not rebuilt")
	}
}

func TestK7_RejectedOutcomes(t *testing.T) {
	ro := readOnly(t, "read")
	mu := mutating(t, "write", tool.Unsafe)
	cases := []struct {
		name string
		def  tool.Definition
		exec execFunc
		want tool.Violation
	}{
		{"result with error", ro, func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
			r, _ := tool.NewResult(c.ID(), "x")
			return r, tool.Fail(c.ID(), prob("io"))
		}, tool.ResultWithError},
		{"untyped error", mu, func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
			return tool.Result{}, errors.New("boom secret-token")
		}, tool.UntypedError},
		{"bare context error", ro, func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
			return tool.Result{}, context.Canceled
		}, tool.UntypedError},
		{"validation error from a helper", ro, func(c tool.Call) execFunc {
			return func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
				return tool.Result{}, tool.Fail("", prob("io"))
			}
		}(tool.Call{}), tool.UntypedError},
		{"wrapped execution error", mu, func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
			return tool.Result{}, fmt.Errorf("context secret-token: %w", tool.Fail(c.ID(), prob("io")))
		}, tool.IndirectError},
		{"joined execution error", ro, func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
			return tool.Result{}, errors.Join(tool.Fail(c.ID(), prob("io")), errors.New("other"))
		}, tool.IndirectError},
		{"two joined execution errors", ro, func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
			return tool.Result{}, errors.Join(tool.Fail(c.ID(), prob("io")), tool.Fail(c.ID(), prob("io2")))
		}, tool.IndirectError},
		{"zero result nil error", mu, func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
			return tool.Result{}, nil
		}, tool.EmptyOutcome},
		{"result for another call", ro, func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
			return tool.NewResult("other", "x")
		}, tool.ForeignCall},
		{"error for another call", mu, func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
			return tool.Result{}, tool.Fail("other", prob("io"))
		}, tool.ForeignCall},
		{"zero execution error", ro, func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
			return tool.Result{}, &tool.ExecutionError{}
		}, tool.InvalidError},
		{"typed nil execution error", mu, func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
			var e *tool.ExecutionError
			return tool.Result{}, e
		}, tool.InvalidError},
		{"retry advice on unsafe tool", mu, func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
			return tool.Result{}, tool.Retryable(c.ID(), prob("busy"), 0)
		}, tool.UnsafeRetry},
		{"uncertain from read-only tool", ro, func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
			return tool.Result{}, tool.FailUncertain(c.ID(), prob("io"), nil)
		}, tool.ContradictoryOutcome},
		{"dispatch failure from a tool", ro, func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
			return tool.Result{}, &tool.DispatchFailure{}
		}, tool.UntypedError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := dispatcher(t, newTool(tc.def, tc.exec))
			r, err := d.Dispatch(context.Background(), call(t, "c1", tc.def.Name()), nil)
			require.True(t, r.IsZero(), "a rejected outcome never yields a result")
			ee, ok := err.(*tool.ExecutionError)
			require.True(t, ok, "the dispatcher's own direct execution error, got %T", err)
			require.Equal(t, "tool_protocol_violation", ee.Problem().Code())
			require.Equal(t, "c1", string(ee.CallID()))
			require.Equal(t, tool.NoRetry, ee.Retry())
			wantOutcome := tool.Definitive
			if tc.def.Effect() == tool.Mutating {
				wantOutcome = tool.Uncertain // it may have half-happened
			}
			require.Equal(t, wantOutcome, ee.Outcome())
			var pe *tool.ProtocolError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.want, pe.Violation())
			require.Equal(t, tc.def.Name(), pe.Tool())
			require.Equal(t, "c1", string(pe.CallID()))
			require.NotContains(t, err.Error(), "secret-token")
			require.NotErrorIs(t, err, context.Canceled, "a rejected error's chain is dropped")
		})
	}
}

func TestK25_ToolPanicContained(t *testing.T) {
	for _, d := range []tool.Definition{readOnly(t, "read"), mutating(t, "write", tool.Idempotent)} {
		disp := dispatcher(t, newTool(d, func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
			panic("secret-token")
		}))
		var r tool.Result
		var err error
		require.NotPanics(t, func() { r, err = disp.Dispatch(context.Background(), call(t, "c1", d.Name()), nil) })
		require.True(t, r.IsZero())
		ee := executionError(t, err)
		require.Equal(t, "tool_panic", ee.Problem().Code())
		require.ErrorIs(t, err, tool.ErrPanic)
		require.Equal(t, tool.NoRetry, ee.Retry())
		if d.Effect() == tool.Mutating {
			require.Equal(t, tool.Uncertain, ee.Outcome())
		} else {
			require.Equal(t, tool.Definitive, ee.Outcome())
		}
		require.NotContains(t, err.Error(), "secret-token")
	}
	// panic(nil) is a panic too.
	disp := dispatcher(t, newTool(readOnly(t, "read"), func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
		panic(nil)
	}))
	_, err := disp.Dispatch(context.Background(), call(t, "c1", "read"), nil)
	require.ErrorIs(t, err, tool.ErrPanic)
}

func TestK8_ResultWinsRacingCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := dispatcher(t, newTool(mutating(t, "write", tool.Unsafe), func(ctx context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
		// The tool commits its effect, then the run is cancelled before
		// the result travels back.
		cancel()
		<-ctx.Done()
		return tool.NewResult(c.ID(), "written")
	}))
	r, err := d.Dispatch(ctx, call(t, "c1", "write"), nil)
	require.NoError(t, err)
	require.Equal(t, "written", r.Content())
	require.Error(t, ctx.Err())
}

func TestK8_CancellationErrorKeepsErrorsIs(t *testing.T) {
	// The tools wait for their context, as a cooperative tool does, and
	// report what ended it.
	d := dispatcher(t,
		newTool(readOnly(t, "read"), func(ctx context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
			<-ctx.Done()
			return tool.Result{}, tool.Canceled(c.ID(), ctx.Err())
		}),
		newTool(mutating(t, "write", tool.Unsafe), func(ctx context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
			<-ctx.Done()
			return tool.Result{}, tool.FailUncertain(c.ID(), prob("interrupted"), ctx.Err())
		}),
	)
	for _, name := range []string{"read", "write"} {
		t.Run(name+"/canceled", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go func() {
					synctest.Wait() // the tool is blocked on ctx
					cancel()
				}()
				_, err := d.Dispatch(ctx, call(t, "c1", name), nil)
				require.ErrorIs(t, err, context.Canceled)
				require.NotErrorIs(t, err, context.DeadlineExceeded)
				executionError(t, err)
			})
		})
		t.Run(name+"/deadline", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_, err := d.Dispatch(ctx, call(t, "c1", name), nil)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.NotErrorIs(t, err, context.Canceled)
				executionError(t, err)
			})
		})
	}
}

func TestK8_CancelledBeforeStartIsNotExecuted(t *testing.T) {
	ft := okTool(mutating(t, "write", tool.Unsafe))
	d := dispatcher(t, ft)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := d.Dispatch(ctx, call(t, "c1", "write"), nil)
	require.True(t, r.IsZero())
	require.ErrorIs(t, err, context.Canceled)
	ee := executionError(t, err)
	require.Equal(t, tool.Definitive, ee.Outcome(), "nothing ran, so nothing is uncertain")
	require.Equal(t, "canceled", ee.Problem().Code())
	require.Zero(t, ft.Runs())
}

// The dispatcher passes a cancellation-shaped failure through unchanged even
// when the context is alive; deciding that the run was NOT cancelled is the
// engine's job, from the run's own context (K8, K24).
func TestK8_DispatcherDoesNotClassifyRunCancellation(t *testing.T) {
	d := dispatcher(t, newTool(readOnly(t, "read"), func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
		return tool.Result{}, tool.Canceled(c.ID(), context.Canceled)
	}))
	ctx := context.Background()
	_, err := d.Dispatch(ctx, call(t, "c1", "read"), nil)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, ctx.Err(), "so the engine must classify this as an ordinary failure")
}

func TestK7_CallArgumentsReachTool(t *testing.T) {
	var got string
	d := dispatcher(t, newTool(readOnly(t, "read"), func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
		got = c.ArgumentsString()
		return tool.NewResult(c.ID(), strings.ToUpper(got))
	}))
	_, err := d.Dispatch(context.Background(), call(t, "c1", "read"), nil)
	require.NoError(t, err)
	require.Equal(t, `{"path":"a.txt"}`, got)
}

func TestK6_ConcurrentDispatch(t *testing.T) {
	// Tools are concurrent singletons; one dispatcher serves many runs.
	var mu sync.Mutex
	seen := map[string]bool{}
	watch := tool.ObserveFunc(func(_ context.Context, _ tool.Definition, c tool.Call, o tool.Observation) {
		r, ok := o.Result()
		if ok {
			mu.Lock()
			seen[string(c.ID())+"="+string(r.CallID())] = true
			mu.Unlock()
		}
	})
	d, err := tool.NewDispatcher(tool.DispatcherConfig{
		Tools: []tool.Tool{newTool(readOnly(t, "read"), func(ctx context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
			if err := r.Report(ctx, progress(t, c.ID(), "x")); err != nil {
				return tool.Result{}, tool.Fail(c.ID(), prob("io"))
			}
			return tool.NewResult(c.ID(), string(c.ID()))
		})},
		Guards: []tool.Guard{watch},
	})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				cid := id.Call(fmt.Sprintf("c%d-%d", g, i))
				c, err := tool.NewCall(cid, "read", nil)
				if err != nil {
					t.Error(err)
					return
				}
				r, err := d.Dispatch(context.Background(), c, &recorder{})
				if err != nil || r.CallID() != cid || r.Content() != string(cid) {
					t.Errorf("call %s: got %q, %v", cid, r.Content(), err)
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 400)
	for k := range seen {
		a, b, _ := strings.Cut(k, "=")
		require.Equal(t, a, b)
	}
}
