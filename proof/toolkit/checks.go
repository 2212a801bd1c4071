package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/goleak"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

func violation(format string, args ...any) error {
	return fmt.Errorf("toolkit: "+format, args...)
}

type outcome struct {
	res tool.Result
	err error
}

// execute calls t.Execute within d, containing a panic: a tool that hangs
// or panics fails the check instead of the test binary.
func execute(ctx context.Context, t tool.Tool, call tool.Call, r tool.Reporter, d time.Duration) (outcome, error) {
	ch := make(chan outcome, 1)
	var panicked atomic.Value
	go func() {
		var o outcome
		defer func() {
			if v := recover(); v != nil {
				panicked.Store(fmt.Sprint(v))
			}
			ch <- o
		}()
		o.res, o.err = t.Execute(ctx, call, r)
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case o := <-ch:
		if v := panicked.Load(); v != nil {
			return o, violation("K7: Execute panicked (%v); a tool returns an execution error instead", v)
		}
		return o, nil
	case <-timer.C:
		return outcome{}, violation("Execute did not return within %v", d)
	}
}

var seq atomic.Int64

func newCall(def tool.Definition, args json.RawMessage) (tool.Call, error) {
	return tool.NewCall(id.Call(fmt.Sprintf("call-kit-%d", seq.Add(1))), def.Name(), args)
}

// discard is a reporter that accepts everything.
type discard struct{}

func (discard) Report(context.Context, tool.Progress) error { return nil }

// checkOutcome holds one outcome to K7.
func checkOutcome(def tool.Definition, call tool.Call, o outcome) error {
	if o.err == nil {
		if o.res.IsZero() {
			return violation("K7: Execute returned neither a result nor an error")
		}
		if o.res.CallID() != call.ID() {
			return violation("K7: the result answers call %q, not %q", o.res.CallID(), call.ID())
		}
		return nil
	}
	if !o.res.IsZero() {
		return violation("K7: Execute returned a result and an error (%v); exactly one", o.err)
	}
	ee, ok := o.err.(*tool.ExecutionError)
	if !ok {
		return violation("K7: Execute returned %T (%v), not a direct *tool.ExecutionError (not wrapped, not joined)", o.err, o.err)
	}
	if ee.CallID() != call.ID() {
		return violation("K7: the execution error answers call %q, not %q", ee.CallID(), call.ID())
	}
	if ee.Retry() == tool.RetryAllowed && def.Replay() == tool.Unsafe {
		return violation("K7: the execution error allows a retry of a replay-unsafe tool")
	}
	return nil
}

// callOnce makes one call with args and holds its outcome to K7.
func callOnce(ctx context.Context, t tool.Tool, args json.RawMessage, r tool.Reporter, d time.Duration) (tool.Call, outcome, error) {
	def := t.Definition()
	call, err := newCall(def, args)
	if err != nil {
		return call, outcome{}, violation("the Config's arguments are not a valid call: %v", err)
	}
	o, err := execute(ctx, t, call, r, d)
	if err != nil {
		return call, o, err
	}
	return call, o, checkOutcome(def, call, o)
}

func checkDefinition(t tool.Tool, _ json.RawMessage, _ options) error {
	def := t.Definition()
	if def.IsZero() {
		return violation("K4: Definition returned the zero definition")
	}
	caps := slices.Collect(def.Capabilities())
	if !slices.IsSorted(caps) || len(slices.Compact(slices.Clone(caps))) != len(caps) {
		return violation("K5: capabilities %v are not a set in canonical order", caps)
	}
	again, err := tool.NewDefinition(tool.DefinitionConfig{
		Name: def.Name(), Description: def.Description(), Schema: def.Schema(),
		Effect: def.Effect(), Replay: def.Replay(), Capabilities: caps,
	})
	if err != nil {
		return violation("K4: the definition's own fields do not make a definition: %v", err)
	}
	if again.Fingerprint() != def.Fingerprint() {
		return violation("K5: the fingerprint %s is not the one its fields give, %s", def.Fingerprint(), again.Fingerprint())
	}
	for range 3 {
		if f := t.Definition().Fingerprint(); f != def.Fingerprint() {
			return violation("K5: Definition changed between calls (fingerprint %s, then %s)", def.Fingerprint(), f)
		}
	}
	return nil
}

func checkDispatcher(t tool.Tool, args json.RawMessage, o options) error {
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{t}})
	if err != nil {
		return violation("K6: the canonical dispatcher refuses the tool: %v", err)
	}
	def := t.Definition()
	got, ok := d.Lookup(def.Name())
	if !ok || got.Fingerprint() != def.Fingerprint() {
		return violation("K6: the dispatcher does not serve the tool's definition")
	}
	other, err := tool.NewCall("call-kit-other", def.Name()+"_other", args)
	if err != nil {
		return violation("the Config's arguments are not a valid call: %v", err)
	}
	if _, err := d.Dispatch(context.Background(), other, discard{}); !errors.Is(err, tool.ErrUnknownTool) {
		return violation("K6: the dispatcher ran a name it does not hold: %v", err)
	}
	call, err := newCall(def, args)
	if err != nil {
		return violation("the Config's arguments are not a valid call: %v", err)
	}
	_, err = dispatch(d, call, o.wait)
	var pe *tool.ProtocolError
	if errors.As(err, &pe) {
		return violation("K7: the dispatcher found a protocol violation: %v", pe.Violation())
	}
	return nil
}

func dispatch(d tool.Dispatcher, call tool.Call, wait time.Duration) (tool.Result, error) {
	type r struct {
		res tool.Result
		err error
	}
	ch := make(chan r, 1)
	go func() {
		res, err := d.Dispatch(context.Background(), call, discard{})
		ch <- r{res, err}
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case x := <-ch:
		return x.res, x.err
	case <-timer.C:
		return tool.Result{}, violation("Dispatch did not return within %v", wait)
	}
}

func checkValid(t tool.Tool, args json.RawMessage, o options) error {
	_, out, err := callOnce(context.Background(), t, args, discard{}, o.wait)
	if err != nil {
		return err
	}
	if out.err != nil {
		return violation("K7: the Valid call failed: %v", out.err)
	}
	if p, bad := out.res.Problem(); bad {
		return violation("K7: the Valid call came back with the problem %s", p.Code())
	}
	return nil
}

func checkInvalid(t tool.Tool, args json.RawMessage, o options) error {
	_, out, err := callOnce(context.Background(), t, args, discard{}, o.wait)
	if err != nil {
		return err
	}
	if out.err != nil {
		return violation("K7: a mistake the model can fix is a problem result, not an execution error: %v", out.err)
	}
	if _, bad := out.res.Problem(); !bad {
		return violation("K7: the Invalid call came back without a problem")
	}
	return nil
}

func checkConcurrent(t tool.Tool, args json.RawMessage, o options) error {
	errs := make([]error, Concurrent)
	var wg sync.WaitGroup
	for i := range Concurrent {
		wg.Go(func() { _, _, errs[i] = callOnce(context.Background(), t, args, discard{}, o.wait) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func cancelledOutcome(o outcome) error {
	if o.err != nil && !errors.Is(o.err, context.Canceled) {
		return violation("K8: after its context was cancelled the tool failed with %v, which is not context.Canceled (errors.Is)", o.err)
	}
	return nil
}

func checkCancelledBefore(t tool.Tool, args json.RawMessage, o options) error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, out, err := callOnce(ctx, t, args, discard{}, o.prompt)
	if err != nil {
		return err
	}
	return cancelledOutcome(out)
}

// checkCancelledWhileRunning starts the Slow call, which runs until its
// context ends, and cancels it.
func checkCancelledWhileRunning(t tool.Tool, args json.RawMessage, o options) error {
	def := t.Definition()
	call, err := newCall(def, args)
	if err != nil {
		return violation("the Config's arguments are not a valid call: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan outcome, 1)
	go func() {
		out, err := execute(ctx, t, call, discard{}, o.prompt+o.wait)
		if err != nil {
			out.err = err
		}
		ch <- out
	}()
	cancel()
	timer := time.NewTimer(o.prompt)
	defer timer.Stop()
	select {
	case out := <-ch:
		if err := checkOutcome(def, call, out); err != nil {
			return err
		}
		return cancelledOutcome(out)
	case <-timer.C:
		return violation("K8: the call did not return within %v of its cancellation", o.prompt)
	}
}

// failing is a reporter that refuses every report and records any that
// comes after Execute returned.
type failing struct {
	returned atomic.Bool
	late     atomic.Int64
}

var errReporter = errors.New("toolkit: the reporter refuses progress")

func (f *failing) Report(context.Context, tool.Progress) error {
	if f.returned.Load() {
		f.late.Add(1)
	}
	return errReporter
}

func checkReporter(t tool.Tool, args json.RawMessage, o options) error {
	snapshot := goleak.IgnoreCurrent()
	r := &failing{}
	_, out, err := callOnce(context.Background(), t, args, r, o.wait)
	r.returned.Store(true)
	if err != nil {
		return err
	}
	if out.err != nil {
		return violation("K9: with a failing reporter the Valid call failed: %v", out.err)
	}
	if err := goleak.Find(snapshot); err != nil {
		return violation("K9: a goroutine of the tool outlived Execute: %v", err)
	}
	if n := r.late.Load(); n > 0 {
		return violation("K9: the tool reported %d times after Execute returned", n)
	}
	return nil
}

// counting counts the calls that reach the tool.
type counting struct {
	tool.Tool
	n atomic.Int64
}

func (c *counting) Execute(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
	c.n.Add(1)
	return c.Tool.Execute(ctx, call, r)
}

func checkGuards(t tool.Tool, args json.RawMessage, o options) error {
	c := &counting{Tool: t}
	deny := tool.DecideFunc(func(context.Context, tool.Definition, tool.Call) tool.Decision {
		return tool.Deny(problem.Must("denied_by_kit", "the kit denies this call"))
	})
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{c}, Guards: []tool.Guard{deny}})
	if err != nil {
		return violation("K6: the canonical dispatcher refuses the tool: %v", err)
	}
	call, err := newCall(t.Definition(), args)
	if err != nil {
		return violation("the Config's arguments are not a valid call: %v", err)
	}
	res, err := dispatch(d, call, o.wait)
	if p, denied := res.Problem(); err != nil || !denied || p.Code() != "denied_by_kit" || c.n.Load() != 0 {
		return violation("K10: a denied call reached the tool (%d calls) or was not denied: %v", c.n.Load(), err)
	}
	var seen tool.Observation
	watch := tool.ObserveFunc(func(_ context.Context, _ tool.Definition, _ tool.Call, ob tool.Observation) { seen = ob })
	d, err = tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{t}, Guards: []tool.Guard{watch}})
	if err != nil {
		return violation("K6: the canonical dispatcher refuses the tool: %v", err)
	}
	if call, err = newCall(t.Definition(), args); err != nil {
		return violation("the Config's arguments are not a valid call: %v", err)
	}
	res, err = dispatch(d, call, o.wait)
	got, ok := seen.Result()
	if err != nil || !ok || got.Content() != res.Content() || got.CallID() != res.CallID() {
		return violation("K10: the observing guard saw another outcome than the caller got (%v)", err)
	}
	return nil
}
