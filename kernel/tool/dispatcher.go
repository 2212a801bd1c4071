package tool

import (
	"cmp"
	"context"
	"errors"
	"iter"
	"slices"
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// DispatcherConfig is the input to NewDispatcher.
type DispatcherConfig struct {
	// Tools are the executable tools; names must be unique. Each tool's
	// Definition is read exactly once, by NewDispatcher.
	Tools []Tool
	// Guards run around every call to a known tool (K10); see Guard.
	Guards []Guard
}

// Canonical is the one dispatcher every tool call goes through (K6). It is
// immutable after construction and safe for concurrent use.
//
// Dispatch returns exactly one of:
//   - a valid Result correlated with the call, possibly carrying a
//     model-visible problem (also what a guard's denial produces);
//   - an *ExecutionError correlated with the call: the tool's own, or one
//     the dispatcher built because the tool panicked ("tool_panic", cause
//     ErrPanic), broke the protocol ("tool_protocol_violation", cause
//     *ProtocolError), or the context was already done before the tool
//     started ("canceled"/"deadline_exceeded", the tool is not run). A
//     failure the dispatcher did not see coming is Uncertain for a mutating
//     tool and Definitive for a read-only one, and never retries;
//   - a *DispatchFailure when the outcome was an execution error and the
//     caller's Reporter also failed (K9);
//   - for calls rejected before anything ran: a *bound.Error for a zero
//     Call, or an error matching ErrUnknownTool (also a *bound.Error).
//
// A valid Result wins over a cancellation that races with the tool's
// return (K8): Dispatch does not look at ctx after Execute. Whether the run
// was cancelled is not the dispatcher's call: the engine decides it from
// the run's own context, so an execution error matching context.Canceled
// while the run's context is still active is an ordinary failure.
type Canonical struct {
	names  []string     // sorted; names[i] == defs[i].Name(), for a cheap search
	defs   []Definition // name order
	tools  []Tool       // tools[i] serves defs[i]
	guards guards
}

var _ Dispatcher = (*Canonical)(nil)

// NewDispatcher reads every tool's definition once and freezes the result.
// Nil tools or guards, zero or duplicate definitions, a panicking
// Definition method and more than bound.MaxToolsPerPlan tools are errors.
func NewDispatcher(cfg DispatcherConfig) (*Canonical, error) {
	if err := bound.Count("dispatcher.tools", len(cfg.Tools), bound.MaxToolsPerPlan); err != nil {
		return nil, err
	}
	type entry struct {
		def  Definition
		tool Tool
	}
	entries := make([]entry, 0, len(cfg.Tools))
	for i, t := range cfg.Tools {
		field := "dispatcher.tools[" + strconv.Itoa(i) + "]"
		if t == nil {
			return nil, bound.Missing(field)
		}
		def, err := definitionOf(field, t)
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{def: def, tool: t})
	}
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.def.Name(), b.def.Name()) })
	d := &Canonical{
		names: make([]string, len(entries)),
		defs:  make([]Definition, len(entries)),
		tools: make([]Tool, len(entries)),
	}
	for i, e := range entries {
		if i > 0 && entries[i-1].def.Name() == e.def.Name() {
			return nil, bound.Conflicting("dispatcher.tools", "two tools are named "+e.def.Name())
		}
		d.names[i], d.defs[i], d.tools[i] = e.def.Name(), e.def, e.tool
	}
	for i, g := range cfg.Guards {
		if g == nil {
			return nil, bound.Missing("dispatcher.guards[" + strconv.Itoa(i) + "]")
		}
	}
	d.guards = slices.Clone(cfg.Guards)
	return d, nil
}

func definitionOf(field string, t Tool) (def Definition, err error) {
	defer func() {
		if recover() != nil {
			def, err = Definition{}, bound.Malformedf(field, "Definition panicked")
		}
	}()
	def = t.Definition()
	if def.IsZero() {
		return Definition{}, bound.Malformedf(field, "Definition returned the zero definition")
	}
	return def, nil
}

// Definitions yields the frozen definitions in name order.
func (d *Canonical) Definitions() iter.Seq[Definition] { return slices.Values(d.defs) }

// Lookup returns the frozen definition named name.
func (d *Canonical) Lookup(name string) (Definition, bool) {
	i, ok := slices.BinarySearch(d.names, name)
	if !ok {
		return Definition{}, false
	}
	return d.defs[i], true
}

// Len returns the number of tools.
func (d *Canonical) Len() int { return len(d.defs) }

// Dispatch runs call; see Canonical for what it returns. r may be nil.
func (d *Canonical) Dispatch(ctx context.Context, call Call, r Reporter) (Result, error) {
	if call.IsZero() {
		return Result{}, bound.Missing("tool_call")
	}
	i, ok := slices.BinarySearch(d.names, call.Name())
	if !ok {
		return Result{}, unknownTool()
	}
	if len(d.guards) == 0 {
		return d.run(ctx, i, call, r).outcome()
	}
	return d.guards.dispatch(ctx, d.defs[i], call, func() settled { return d.run(ctx, i, call, r) })
}

// run executes tool i and settles its outcome.
func (d *Canonical) run(ctx context.Context, i int, call Call, r Reporter) settled {
	def := &d.defs[i]
	if err := ctx.Err(); err != nil {
		// Not started, so nothing happened: definitive.
		return settled{err: internalError(call.ID(), Definitive, canceledProblem(err), err)}
	}
	cr := &callReporter{callID: call.ID(), next: r}
	res, err := execute(ctx, d.tools[i], call, cr)
	reporterFailure := cr.close()
	var s settled
	if err == errPanicked {
		s.err = internalError(call.ID(), outcomeOf(def), problemToolPanic, ErrPanic)
	} else {
		s = settle(def, call, res, err)
	}
	if s.err != nil {
		s.reporter = reporterFailure
	}
	return s
}

// errPanicked is unexported so no tool can return it.
var errPanicked = errors.New("panicked")

func execute(ctx context.Context, t Tool, call Call, r Reporter) (res Result, err error) {
	defer func() {
		if recover() != nil {
			res, err = Result{}, errPanicked
		}
	}()
	return t.Execute(ctx, call, r)
}

// settle validates a tool's (Result, error) against the protocol (K7) and
// replaces anything invalid with the dispatcher's own execution error.
func settle(def *Definition, call Call, res Result, err error) settled {
	if err == nil {
		switch {
		case res.IsZero():
			return settled{err: protocolViolation(def, call, EmptyOutcome)}
		case res.callID != call.ID():
			return settled{err: protocolViolation(def, call, ForeignCall)}
		}
		return settled{result: res}
	}
	if !res.IsZero() {
		return settled{err: protocolViolation(def, call, ResultWithError)}
	}
	ee, ok := err.(*ExecutionError)
	if !ok {
		if errors.As(err, &ee) {
			return settled{err: protocolViolation(def, call, IndirectError)}
		}
		return settled{err: protocolViolation(def, call, UntypedError)}
	}
	return settleError(def, call, ee)
}

func settleError(def *Definition, call Call, ee *ExecutionError) settled {
	if v := ee.violation(def); v != 0 {
		return settled{err: protocolViolation(def, call, v)}
	}
	if ee.callID != call.ID() {
		return settled{err: protocolViolation(def, call, ForeignCall)}
	}
	return settled{err: ee}
}
