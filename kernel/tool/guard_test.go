package tool_test

import (
	"context"
	"errors"
	"iter"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// mutableCause is a tool's own cause type with exported, mutable state.
type mutableCause struct{ Detail string }

func (c *mutableCause) Error() string { return c.Detail }

// vandal is a post-execution guard that tries everything it can to change
// the outcome it observes.
type vandal struct {
	seen []tool.Observation
}

func (v *vandal) Before(context.Context, tool.Definition, tool.Call) tool.Decision {
	return tool.Allow()
}

func (v *vandal) After(ctx context.Context, def tool.Definition, call tool.Call, o tool.Observation) {
	v.seen = append(v.seen, o)
	// Mutate every copy it can get at.
	args := call.Arguments()
	for i := range args {
		args[i] = 'X'
	}
	schema := def.Schema()
	for i := range schema {
		schema[i] = 'X'
	}
	if r, ok := o.Result(); ok {
		r, _ = tool.NewResult("evil", "rewritten")
		_ = r
	}
	if e := o.Err(); e != nil {
		*e = tool.ExecutionError{} // zero the detached copy
		var mc *mutableCause
		if errors.As(e, &mc) {
			mc.Detail = "rewritten"
		}
	}
	o = tool.Observation{}
	_ = o
	panic("vandal secret-token")
}

// snapshotOutcome records an outcome in a comparable, deep form.
type snapshotOutcome struct {
	result  tool.Result
	errText string
	err     error
	cause   string
}

func capture(r tool.Result, err error) snapshotOutcome {
	s := snapshotOutcome{result: r, err: err}
	if err != nil {
		s.errText = err.Error()
		var mc *mutableCause
		if errors.As(err, &mc) {
			s.cause = mc.Detail
		}
	}
	return s
}

func TestK10_GuardCannotCorruptOutcome(t *testing.T) {
	bodies := map[string]func(t *testing.T) (execFunc, tool.Reporter){
		"result": func(t *testing.T) (execFunc, tool.Reporter) {
			return func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
				return tool.NewResult(c.ID(), "authoritative bytes \x00\xe2\x9c\x93")
			}, nil
		},
		"problem result": func(t *testing.T) (execFunc, tool.Reporter) {
			return func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
				return tool.NewProblemResult(c.ID(), prob("not_found"), "detail")
			}, nil
		},
		"execution error with mutable cause": func(t *testing.T) (execFunc, tool.Reporter) {
			return func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
				return tool.Result{}, tool.FailUncertain(c.ID(), prob("io"), &mutableCause{Detail: "original"})
			}, nil
		},
		"dispatch failure": func(t *testing.T) (execFunc, tool.Reporter) {
			return func(ctx context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
				_ = r.Report(ctx, progress(t, c.ID(), "x"))
				return tool.Result{}, tool.FailUncertain(c.ID(), prob("io"), &mutableCause{Detail: "original"})
			}, &recorder{err: errors.New("down")}
		},
		"protocol violation": func(t *testing.T) (execFunc, tool.Reporter) {
			return func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
				return tool.Result{}, errors.New("untyped")
			}, nil
		},
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			exec, rep := body(t)
			var fromTool snapshotOutcome
			ft := newTool(mutating(t, "write", tool.Unsafe), func(ctx context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
				res, err := exec(ctx, c, r)
				fromTool = capture(res, err)
				return res, err
			})
			v1, v2 := &vandal{}, &vandal{}
			d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{ft}, Guards: []tool.Guard{v1, v2}})
			require.NoError(t, err)
			plain := dispatcher(t, ft)

			c := call(t, "c1", "write")
			var res tool.Result
			require.NotPanics(t, func() { res, err = d.Dispatch(context.Background(), c, rep) })
			got := capture(res, err)
			fromGuardedRun := fromTool
			require.Len(t, v1.seen, 1)
			require.Len(t, v2.seen, 1, "a panicking guard does not stop the next one")

			// Byte for byte what the tool returned (or, for a protocol
			// violation, what an unguarded dispatcher returns).
			pr, perr := plain.Dispatch(context.Background(), c, rep)
			want := capture(pr, perr)
			if name != "protocol violation" && name != "dispatch failure" {
				require.Equal(t, fromGuardedRun.result, got.result)
				require.Equal(t, fromGuardedRun.errText, got.errText)
				if fromGuardedRun.err != nil {
					require.Same(t, fromGuardedRun.err.(*tool.ExecutionError), err.(*tool.ExecutionError))
				}
			}
			require.Equal(t, want.result, got.result)
			require.Equal(t, []byte(want.result.Content()), []byte(got.result.Content()))
			require.Equal(t, want.errText, got.errText)
			require.Equal(t, want.cause, got.cause)
			if fromGuardedRun.cause != "" {
				require.Equal(t, "original", got.cause)
			}
			require.Equal(t, `{"path":"a.txt"}`, c.ArgumentsString())
			def, _ := d.Lookup("write")
			require.Equal(t, `{"type":"object"}`, def.SchemaString())
			if name == "dispatch failure" {
				var f *tool.DispatchFailure
				require.ErrorAs(t, err, &f)
				require.Same(t, fromGuardedRun.err.(*tool.ExecutionError), f.Execution())
				require.Equal(t, "original", got.cause)
				require.True(t, v1.seen[0].ReporterFailed())
			}
		})
	}
}

func TestK10_ObservationIsDetached(t *testing.T) {
	cause := &mutableCause{Detail: "original secret"}
	var obs tool.Observation
	d, err := tool.NewDispatcher(tool.DispatcherConfig{
		Tools: []tool.Tool{newTool(readOnly(t, "read"), func(ctx context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
			return tool.Result{}, tool.Canceled(c.ID(), errors.Join(context.Canceled, cause))
		})},
		Guards: []tool.Guard{tool.ObserveFunc(func(_ context.Context, _ tool.Definition, _ tool.Call, o tool.Observation) { obs = o })},
	})
	require.NoError(t, err)
	_, err = d.Dispatch(context.Background(), call(t, "c1", "read"), nil)
	require.ErrorAs(t, err, new(*mutableCause), "the caller keeps the tool's cause")

	e := obs.Err()
	require.NotNil(t, e)
	require.NotSame(t, executionError(t, err), e, "guards get a copy")
	require.Equal(t, "canceled", e.Problem().Code())
	require.ErrorIs(t, e, context.Canceled, "classification survives detaching")
	require.False(t, errors.As(e, new(*mutableCause)), "the tool's mutable cause is not reachable")
	_, ok := obs.Result()
	require.False(t, ok)
	require.False(t, obs.Denied())
}

func TestK10_DenyReturnsProblemResultWithoutExecuting(t *testing.T) {
	ft := okTool(mutating(t, "write", tool.Unsafe))
	var observed []tool.Observation
	deny := tool.DecideFunc(func(_ context.Context, def tool.Definition, c tool.Call) tool.Decision {
		if def.Effect() == tool.Mutating {
			return tool.Deny(prob("permission_denied"))
		}
		return tool.Allow()
	})
	never := tool.DecideFunc(func(context.Context, tool.Definition, tool.Call) tool.Decision {
		t.Error("a guard after a denial must not be asked")
		return tool.Allow()
	})
	watch := tool.ObserveFunc(func(_ context.Context, _ tool.Definition, _ tool.Call, o tool.Observation) {
		observed = append(observed, o)
	})
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{ft}, Guards: []tool.Guard{watch, deny, never}})
	require.NoError(t, err)
	r, err := d.Dispatch(context.Background(), call(t, "c1", "write"), nil)
	require.NoError(t, err, "a denial is model-visible data, not an infrastructure failure")
	require.Equal(t, "c1", string(r.CallID()))
	p, ok := r.Problem()
	require.True(t, ok)
	require.Equal(t, "permission_denied", p.Code())
	require.Zero(t, ft.Runs())
	require.Len(t, observed, 1)
	require.True(t, observed[0].Denied())
}

func TestK10_GuardFailuresFailClosed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		guard tool.Guard
		code  string
	}{
		{"panic", tool.DecideFunc(func(context.Context, tool.Definition, tool.Call) tool.Decision { panic("secret-token") }), "guard_panic"},
		{"zero decision", tool.DecideFunc(func(context.Context, tool.Definition, tool.Call) tool.Decision { return tool.Decision{} }), "guard_protocol_violation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := okTool(mutating(t, "write", tool.Unsafe))
			d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{ft}, Guards: []tool.Guard{tc.guard}})
			require.NoError(t, err)
			r, err := d.Dispatch(context.Background(), call(t, "c1", "write"), nil)
			require.True(t, r.IsZero())
			ee := executionError(t, err)
			require.Equal(t, tc.code, ee.Problem().Code())
			require.Equal(t, tool.Definitive, ee.Outcome(), "the tool never ran")
			require.Zero(t, ft.Runs())
			require.NotContains(t, err.Error(), "secret-token")
		})
	}
}

func TestK10_AfterRunsInReverseOrderForEveryOutcome(t *testing.T) {
	var order []string
	mk := func(name string) tool.Guard {
		return tool.ObserveFunc(func(context.Context, tool.Definition, tool.Call, tool.Observation) { order = append(order, name) })
	}
	ft := okTool(readOnly(t, "read"))
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{ft}, Guards: []tool.Guard{mk("a"), mk("b"), mk("c")}})
	require.NoError(t, err)
	_, err = d.Dispatch(context.Background(), call(t, "c1", "read"), nil)
	require.NoError(t, err)
	require.Equal(t, []string{"c", "b", "a"}, order)

	// Cancelled before start: still observed, tool not run.
	order = nil
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = d.Dispatch(ctx, call(t, "c2", "read"), nil)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []string{"c", "b", "a"}, order)
	require.Equal(t, 1, ft.Runs())

	// Unknown tools never reach the guards.
	order = nil
	_, err = d.Dispatch(context.Background(), call(t, "c3", "nope"), nil)
	require.ErrorIs(t, err, tool.ErrUnknownTool)
	require.Empty(t, order)
}

func TestK10_DecisionValues(t *testing.T) {
	_, denied := tool.Allow().Denied()
	require.False(t, denied)
	p, denied := tool.Deny(prob("nope")).Denied()
	require.True(t, denied)
	require.Equal(t, "nope", p.Code())
	p, denied = tool.Deny(problem.Problem{}).Denied()
	require.True(t, denied)
	require.Equal(t, "call_denied", p.Code(), "a denial always explains itself")
	_, denied = tool.Decision{}.Denied()
	require.False(t, denied)
}

// fakeDispatcher is a non-canonical inner dispatcher for NewGuarded.
type fakeDispatcher struct {
	defs     []tool.Definition
	dispatch execFunc
	calls    int
}

func (f *fakeDispatcher) Definitions() iter.Seq[tool.Definition] { return slices.Values(f.defs) }
func (f *fakeDispatcher) Lookup(name string) (tool.Definition, bool) {
	for _, d := range f.defs {
		if d.Name() == name {
			return d, true
		}
	}
	return tool.Definition{}, false
}
func (f *fakeDispatcher) Dispatch(ctx context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
	f.calls++
	return f.dispatch(ctx, c, r)
}

func TestK10_GuardedDecoratorSnapshotsAndValidates(t *testing.T) {
	inner := &fakeDispatcher{defs: []tool.Definition{readOnly(t, "a"), mutating(t, "b", tool.Unsafe)}}
	v := &vandal{}
	g, err := tool.NewGuarded(inner, v)
	require.NoError(t, err)
	snap := slices.Collect(g.Definitions())
	inner.defs = append(inner.defs, readOnly(t, "c"))
	require.Equal(t, snap, slices.Collect(g.Definitions()), "the decorator's snapshot is frozen")
	_, ok := g.Lookup("c")
	require.False(t, ok)
	_, err = g.Dispatch(context.Background(), call(t, "c1", "c"), nil)
	require.ErrorIs(t, err, tool.ErrUnknownTool)
	require.Zero(t, inner.calls)

	// An inner dispatcher that returns garbage is rejected like a tool.
	inner.dispatch = func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
		return tool.Result{}, errors.New("garbage")
	}
	_, err = g.Dispatch(context.Background(), call(t, "c1", "b"), nil)
	var pe *tool.ProtocolError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, tool.UntypedError, pe.Violation())
	require.Equal(t, tool.Uncertain, executionError(t, err).Outcome())

	// An inner panic is contained.
	inner.dispatch = func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) { panic("x") }
	_, err = g.Dispatch(context.Background(), call(t, "c1", "a"), nil)
	require.ErrorIs(t, err, tool.ErrPanic)

	// A valid result passes through untouched despite the vandal.
	inner.dispatch = func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
		return tool.NewResult(c.ID(), "fine")
	}
	r, err := g.Dispatch(context.Background(), call(t, "c1", "a"), nil)
	require.NoError(t, err)
	require.Equal(t, "fine", r.Content())

	// The inner cannot keep the caller's reporter either.
	var stash tool.Reporter
	rec := &recorder{}
	inner.dispatch = func(_ context.Context, c tool.Call, r tool.Reporter) (tool.Result, error) {
		stash = r
		return tool.NewResult(c.ID(), "fine")
	}
	_, err = g.Dispatch(context.Background(), call(t, "c1", "a"), rec)
	require.NoError(t, err)
	require.ErrorIs(t, stash.Report(context.Background(), progress(t, "c1", "late")), tool.ErrReporterClosed)
	require.Zero(t, rec.Count())
}

func TestK10_GuardedAroundCanonicalKeepsDispatchFailure(t *testing.T) {
	canon := dispatcher(t, failingAfterReport(t, readOnly(t, "read"), func(c tool.Call) error {
		return tool.Canceled(c.ID(), context.Canceled)
	}))
	var obs tool.Observation
	g, err := tool.NewGuarded(canon, tool.ObserveFunc(func(_ context.Context, _ tool.Definition, _ tool.Call, o tool.Observation) { obs = o }))
	require.NoError(t, err)
	reporterErr := errors.New("observer down")
	_, err = g.Dispatch(context.Background(), call(t, "c1", "read"), &recorder{err: reporterErr})
	var f *tool.DispatchFailure
	require.ErrorAs(t, err, &f)
	require.Same(t, reporterErr, f.ReporterFailure())
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, reporterErr)
	require.True(t, obs.ReporterFailed())
}

func TestK10_GuardedConstructionErrors(t *testing.T) {
	_, err := tool.NewGuarded(nil)
	require.ErrorIs(t, err, bound.ErrInvalid)
	_, err = tool.NewGuarded(&fakeDispatcher{defs: []tool.Definition{readOnly(t, "b"), readOnly(t, "a")}})
	require.ErrorIs(t, err, bound.ErrInvalid, "out of order")
	_, err = tool.NewGuarded(&fakeDispatcher{defs: []tool.Definition{readOnly(t, "a"), readOnly(t, "a")}})
	require.ErrorIs(t, err, bound.ErrInvalid, "duplicate")
	_, err = tool.NewGuarded(&fakeDispatcher{defs: []tool.Definition{{}}})
	require.ErrorIs(t, err, bound.ErrInvalid, "zero definition")
	_, err = tool.NewGuarded(&fakeDispatcher{}, nil)
	require.ErrorIs(t, err, bound.ErrInvalid, "nil guard")
}
