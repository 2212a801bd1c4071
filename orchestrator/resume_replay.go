package orchestrator

import (
	"context"
	"io"
	"iter"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// The parts a resumed pair plays its interrupted run with: the journal
// that records model outputs as they complete, a provider that serves the
// recorded ones again, and a plan whose dispatcher serves recorded tool
// outcomes. The kernel sees an ordinary provider and an ordinary plan.

// journaled is the decorator that journals each completed model operation
// of a worker into the pair timeline (pair.model_output), before the
// engine commits its model.completed.
type journaled struct {
	inner model.Provider
	c     *crew
	w     int
}

func (j *journaled) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	s, err := j.inner.Stream(ctx, req)
	if err != nil || s == nil {
		return s, err
	}
	return &journalStream{inner: s, j: j, out: ModelOutput{OperationID: req.Operation()}}, nil
}

type journalStream struct {
	inner model.Stream
	j     *journaled
	out   ModelOutput
	size  int
}

func (s *journalStream) Recv() (model.Item, error) {
	it, err := s.inner.Recv()
	if err != nil {
		return it, err
	}
	switch it.Kind() {
	case model.KindTextDelta:
		s.out.Text += it.Text()
		s.size += len(it.Text())
	case model.KindToolCall:
		c, _ := it.Call()
		s.out.Calls = append(s.out.Calls, JournaledCall{ID: c.ID(), Name: c.Name(), Arguments: c.ArgumentsString()})
		s.size += len(c.ArgumentsString())
	case model.KindCompleted:
		p := s.j.c.pair
		s.out.Worker = p.cfg.Roles[s.j.w]
		s.out.InputTokens, s.out.OutputTokens = it.Usage().Input(), it.Usage().Output()
		if s.size > maxJournalBytes/2 {
			// Escaped, it might not fit one event: the operation is not
			// journaled, and a resume asks the model again.
			return it, nil
		}
		if err := p.tl.emit(s.out); err != nil {
			p.tl.fail(err)
			return model.Item{}, err
		}
	}
	return it, nil
}

func (s *journalStream) Close() error { return s.inner.Close() }

// served is the provider of a resumed pair's worker whose interrupted run
// is replayed: its first model operations are answered from the journal,
// in order, and the rest by the worker's own provider.
type served struct {
	inner model.Provider
	mu    sync.Mutex
	queue []ModelOutput
	n     int // operations answered from the journal
}

func (s *served) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	s.mu.Lock()
	if len(s.queue) == 0 {
		s.mu.Unlock()
		return s.inner.Stream(ctx, req)
	}
	out := s.queue[0]
	s.queue = s.queue[1:]
	s.n++
	s.mu.Unlock()
	items, err := outputItems(out)
	if err != nil {
		return nil, err
	}
	return &itemStream{ctx: ctx, items: items}, nil
}

// stop forgets what is left of the journal: only the replayed run is
// answered from it.
func (s *served) stop() {
	s.mu.Lock()
	s.queue = nil
	s.mu.Unlock()
}

// outputItems are the stream items of a journaled output: its text in
// deltas within the kernel's bound, its calls, and its completion.
func outputItems(out ModelOutput) ([]model.Item, error) {
	var items []model.Item
	for text := out.Text; text != ""; {
		n := len(text)
		if n > bound.MaxTextDeltaBytes {
			n = bound.MaxTextDeltaBytes
			for n > 0 && !utf8.RuneStart(text[n]) {
				n--
			}
		}
		it, err := model.TextDelta(text[:n])
		if err != nil {
			return nil, err
		}
		items = append(items, it)
		text = text[n:]
	}
	for _, c := range out.Calls {
		call, err := tool.NewCall(c.ID, c.Name, []byte(c.Arguments))
		if err != nil {
			return nil, err
		}
		it, err := model.ToolCall(call)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	u, err := model.NewUsage(out.InputTokens, out.OutputTokens)
	if err != nil {
		return nil, err
	}
	return append(items, model.Completed(u, model.Metadata{})), nil
}

// itemStream streams fixed items.
type itemStream struct {
	ctx   context.Context
	items []model.Item
}

func (s *itemStream) Recv() (model.Item, error) {
	if err := s.ctx.Err(); err != nil {
		return model.Item{}, err
	}
	if len(s.items) == 0 {
		return model.Item{}, io.EOF
	}
	it := s.items[0]
	s.items = s.items[1:]
	return it, nil
}

func (s *itemStream) Close() error { return nil }

// recordedCall is what the timeline recorded of one tool call of the
// interrupted run.
type recordedCall struct {
	name     string
	effect   string
	replay   string
	ended    bool
	content  string
	problem  problem.Problem
	failed   bool   // tool.failed
	outcome  string // a failed call's outcome
	canceled bool
}

// rerunnable reports whether a call that started without an outcome may
// run again: it cannot have changed anything, or running it again is
// declared harmless (R4).
func (c recordedCall) rerunnable() bool {
	return c.effect == "read_only" || c.replay == "idempotent" || c.replay == "safe"
}

// servingDispatcher serves the recorded outcomes of the interrupted run's
// calls, by call ID, and dispatches every other call to the plan's own
// dispatcher. A replayed model output carries the recorded call IDs, so a
// call is matched to its record exactly, never by position.
type servingDispatcher struct {
	inner tool.Dispatcher

	mu       sync.Mutex
	calls    map[id.Call]recordedCall
	accepted map[id.Call]bool
	n        int // outcomes served
}

func (d *servingDispatcher) Definitions() iter.Seq[tool.Definition] { return d.inner.Definitions() }
func (d *servingDispatcher) Lookup(name string) (tool.Definition, bool) {
	return d.inner.Lookup(name)
}

func (d *servingDispatcher) Dispatch(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
	d.mu.Lock()
	rc, ok := d.calls[call.ID()]
	if ok {
		delete(d.calls, call.ID())
	}
	accepted := d.accepted[call.ID()]
	d.mu.Unlock()
	switch {
	case !ok || rc.name != call.Name():
		return d.inner.Dispatch(ctx, call, r)
	case accepted:
		d.count()
		return tool.NewProblemResult(call.ID(), problemAccepted, "")
	case rc.ended && rc.failed:
		d.count()
		return tool.Result{}, recordedFailure(call.ID(), rc.outcome)
	case rc.ended && rc.canceled:
		d.count()
		return tool.NewProblemResult(call.ID(), problemCancelled, "")
	case rc.ended && !rc.problem.IsZero():
		d.count()
		return tool.NewProblemResult(call.ID(), rc.problem, rc.content)
	case rc.ended:
		d.count()
		return tool.NewResult(call.ID(), rc.content)
	}
	// Started without an outcome: Resume refused it unless it may run
	// again.
	return d.inner.Dispatch(ctx, call, r)
}

// serves reports whether call's outcome comes from the record: it ended,
// or a person accepted it as failed.
func (d *servingDispatcher) serves(call tool.Call) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	rc, ok := d.calls[call.ID()]
	return ok && rc.name == call.Name() && (rc.ended || d.accepted[call.ID()])
}

func (d *servingDispatcher) count() {
	d.mu.Lock()
	d.n++
	d.mu.Unlock()
}

// stop forgets the recorded calls: only the replayed run is served.
func (d *servingDispatcher) stop() {
	d.mu.Lock()
	d.calls, d.accepted = nil, nil
	d.mu.Unlock()
}

var (
	problemAccepted  = problem.Must(ReasonUncertainCall, "the call's outcome was never recorded; a person accepted it as failed on resume, and it was not run again")
	problemCancelled = problem.Must("tool_cancelled", "the call was cancelled before the pair was interrupted")
)

// recordedFailure is the recorded execution error of a call, served again.
func recordedFailure(call id.Call, outcome string) error {
	o := tool.Definitive
	if outcome == tool.Uncertain.String() {
		o = tool.Uncertain
	}
	e, err := tool.NewExecutionError(tool.ExecutionErrorConfig{CallID: call, Outcome: o,
		Problem: problem.Must("tool_failed", "the call failed before the pair was interrupted")})
	if err != nil {
		return err
	}
	return e
}

// servingSource is the plan source of a resumed pair: a lease on the
// pair's plan ID is a lease on the source's exact plan, checked against
// the recorded fingerprint, whose dispatcher serves recorded outcomes.
type servingSource struct {
	inner plan.Source
	plan  plan.Plan // same ID and fingerprint as the recorded plan
}

func (s *servingSource) Lease(ctx context.Context) (*plan.Lease, error) {
	return s.LeaseExact(ctx, s.plan.ID())
}

func (s *servingSource) LeaseExact(ctx context.Context, planID plan.ID) (*plan.Lease, error) {
	l, err := s.inner.LeaseExact(ctx, planID)
	if err != nil || planID != s.plan.ID() {
		return l, err
	}
	if err := l.Plan().Matches(s.plan.Identity()); err != nil {
		_ = l.Release(ctx)
		return nil, err
	}
	return plan.NewLease(s.plan, func() error { return l.Release(context.Background()) }, plan.LeaseConfig{})
}

// resumeIDs gives a resumed pair's engines IDs that the recorded part of
// the pair never used: the host's IDs with a suffix naming the resume.
type resumeIDs struct {
	inner  id.Source
	suffix string
}

func (r *resumeIDs) New(k id.Kind) string { return r.inner.New(k) + r.suffix }

func newResumeIDs(inner id.Source, resumes int) *resumeIDs {
	return &resumeIDs{inner: inner, suffix: ".r" + strconv.Itoa(resumes)}
}
