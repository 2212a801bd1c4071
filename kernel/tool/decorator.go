package tool

import (
	"context"
	"iter"
	"slices"
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// Guarded decorates any Dispatcher with guards (K10), for a host that
// receives a dispatcher it did not build. Like Canonical it publishes a
// snapshot of definitions taken at construction (inner's), rejects names
// outside it, and validates what inner returns as strictly as Canonical
// validates a tool, so a decorator stack cannot smuggle in an outcome the
// canonical dispatcher would reject.
type Guarded struct {
	inner  Dispatcher
	names  []string // names[i] == defs[i].Name()
	defs   []Definition
	guards guards
}

var _ Dispatcher = (*Guarded)(nil)

// NewGuarded snapshots inner's definitions and returns inner wrapped in
// guards.
func NewGuarded(inner Dispatcher, gs ...Guard) (*Guarded, error) {
	if inner == nil {
		return nil, bound.Missing("guarded.inner")
	}
	defs, err := snapshotOf(inner)
	if err != nil {
		return nil, err
	}
	for i, g := range gs {
		if g == nil {
			return nil, bound.Missing("guarded.guards[" + strconv.Itoa(i) + "]")
		}
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name()
	}
	return &Guarded{inner: inner, names: names, defs: defs, guards: slices.Clone(gs)}, nil
}

func snapshotOf(inner Dispatcher) (defs []Definition, err error) {
	defer func() {
		if recover() != nil {
			defs, err = nil, bound.Malformedf("guarded.inner", "Definitions panicked")
		}
	}()
	for def := range inner.Definitions() {
		if def.IsZero() {
			return nil, bound.Malformedf("guarded.inner", "yielded the zero definition")
		}
		if len(defs) == bound.MaxToolsPerPlan {
			return nil, bound.Count("guarded.inner", len(defs)+1, bound.MaxToolsPerPlan)
		}
		if n := len(defs); n > 0 && defs[n-1].Name() >= def.Name() {
			return nil, bound.Malformedf("guarded.inner", "definitions are not in strict name order")
		}
		defs = append(defs, def)
	}
	return defs, nil
}

// Definitions yields the snapshot in name order.
func (g *Guarded) Definitions() iter.Seq[Definition] { return slices.Values(g.defs) }

// Lookup returns the snapshot definition named name.
func (g *Guarded) Lookup(name string) (Definition, bool) {
	i, ok := slices.BinarySearch(g.names, name)
	if !ok {
		return Definition{}, false
	}
	return g.defs[i], true
}

// Dispatch runs the guards around inner.Dispatch; it returns the same kinds
// of outcome as Canonical.Dispatch.
func (g *Guarded) Dispatch(ctx context.Context, call Call, r Reporter) (Result, error) {
	if call.IsZero() {
		return Result{}, bound.Missing("tool_call")
	}
	i, ok := slices.BinarySearch(g.names, call.Name())
	if !ok {
		return Result{}, unknownTool()
	}
	def := &g.defs[i]
	return g.guards.dispatch(ctx, *def, call, func() settled {
		// Inner gets its own closing reporter too, so even a non-canonical
		// inner cannot let a tool keep the caller's reporter (K9).
		cr := &callReporter{callID: call.ID(), next: r}
		res, err := dispatchInner(ctx, g.inner, call, cr)
		reporterFailure := cr.close()
		var s settled
		switch f, isFailure := err.(*DispatchFailure); {
		case err == errPanicked:
			s.err = internalError(call.ID(), outcomeOf(def), problemToolPanic, ErrPanic)
		case isFailure && f != nil && res.IsZero():
			// Inner's structured failure: settle its execution error; the
			// reporter failure is the one we recorded ourselves.
			s = settleError(def, call, f.execution)
		default:
			s = settle(def, call, res, err)
		}
		if s.err != nil {
			s.reporter = reporterFailure
		}
		return s
	})
}

func dispatchInner(ctx context.Context, inner Dispatcher, call Call, r Reporter) (res Result, err error) {
	defer func() {
		if recover() != nil {
			res, err = Result{}, errPanicked
		}
	}()
	return inner.Dispatch(ctx, call, r)
}
