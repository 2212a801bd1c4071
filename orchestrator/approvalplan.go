package orchestrator

import (
	"context"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/spice-orch/spice-orch/idempotency"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/interaction"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// The pair's part in every tool call: each worker's engine is built on a
// workerPlans, which hands out the pair's plans with a workerDispatcher in
// front of the plan's own. That dispatcher names the call for good (its
// idempotency key, R5, on the call's context) and, under an approval
// policy, runs the call behind the kernel's guard mechanism with the
// approval guard (R1). The plan keeps its ID and definitions, so its
// identity, and everything the engine records of it, is the leased plan's.

// callScope is who makes a call, as the approval guard reads it from the
// call's context.
type callScope struct {
	pairID string
	worker string
	runID  id.Run
	asker  interaction.Asker // the engine's reporter: questions become run events
}

type scopeKey struct{}

// runTap is a worker engine's ID source: the host's, noting the run ID it
// hands out, which is the worker's current run while it plays (a pair
// runs one run of a worker at a time).
type runTap struct {
	inner id.Source
	mu    sync.Mutex
	run   id.Run
	// as, when set, names the next run instead of its own ID, once: a
	// resumed pair's restarted run keeps the keys of the run it replaces
	// (resume.go).
	as id.Run
}

func (t *runTap) New(k id.Kind) string {
	s := t.inner.New(k)
	if k == id.KindRun {
		t.mu.Lock()
		r := id.Run(s)
		if t.as != "" {
			r, t.as = t.as, ""
		}
		t.mu.Unlock()
		t.setRun(r)
	}
	return s
}

// setRun names the worker's current run; a run that keeps an ID it already
// has (a resumed snapshot) is named here by whoever resumes it.
func (t *runTap) setRun(r id.Run) {
	t.mu.Lock()
	t.run = r
	t.mu.Unlock()
}

func (t *runTap) current() id.Run {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.run
}

// workerPlans is the plan source of worker w of crew c: the pair's source,
// whose leases it wraps.
type workerPlans struct {
	inner    plan.Source
	c        *crew
	w        int
	approval ApprovalConfig
	// last is the latest plan wrapped, so that the runs of a pair, which
	// share one plan, wrap it once.
	last atomic.Pointer[wrappedPlan]
}

type wrappedPlan struct {
	inner, outer plan.Plan
}

var _ plan.Source = (*workerPlans)(nil)

func (s *workerPlans) Lease(ctx context.Context) (*plan.Lease, error) {
	l, err := s.inner.Lease(ctx)
	if err != nil {
		return nil, err
	}
	return s.wrap(l)
}

func (s *workerPlans) LeaseExact(ctx context.Context, planID plan.ID) (*plan.Lease, error) {
	l, err := s.inner.LeaseExact(ctx, planID)
	if err != nil {
		return nil, err
	}
	return s.wrap(l)
}

// wrap returns a lease on l's plan behind the worker's dispatcher, whose
// release releases l.
func (s *workerPlans) wrap(l *plan.Lease) (*plan.Lease, error) {
	outer, err := s.plan(l.Plan())
	if err == nil {
		// Inline: the callback is ours, and l bounds its own release.
		var wl *plan.Lease
		if wl, err = plan.NewLease(outer, func() error { return l.Release(context.Background()) }, plan.LeaseConfig{Inline: true}); err == nil {
			return wl, nil
		}
	}
	_ = l.Release(context.Background())
	return nil, err
}

func (s *workerPlans) plan(inner plan.Plan) (plan.Plan, error) {
	if w := s.last.Load(); w != nil && w.inner == inner {
		return w.outer, nil
	}
	d := &workerDispatcher{inner: inner.Dispatcher(), s: s}
	if !s.approval.Policy.IsNever() {
		g, err := tool.NewGuarded(d.inner, approvalGuard{cfg: s.approval})
		if err != nil {
			return plan.Plan{}, err
		}
		d.guarded = g
	}
	outer, err := plan.New(inner.ID(), d)
	if err != nil {
		return plan.Plan{}, err
	}
	s.last.Store(&wrappedPlan{inner: inner, outer: outer})
	return outer, nil
}

// workerDispatcher is the leased plan's dispatcher as the worker's engine
// sees it.
type workerDispatcher struct {
	inner   tool.Dispatcher
	guarded *tool.Guarded // inner behind the approval guard; nil without a policy
	s       *workerPlans
}

var _ tool.Dispatcher = (*workerDispatcher)(nil)

func (d *workerDispatcher) Definitions() iter.Seq[tool.Definition] { return d.inner.Definitions() }

func (d *workerDispatcher) Lookup(name string) (tool.Definition, bool) { return d.inner.Lookup(name) }

// Dispatch puts the call's idempotency key on its context and runs it,
// behind the approval guard when there is a policy.
func (d *workerDispatcher) Dispatch(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
	if call.IsZero() {
		return d.inner.Dispatch(ctx, call, r)
	}
	c := d.s.c
	var pairID string
	if p := c.pair; p != nil {
		pairID = p.task.pairID
	}
	runID := c.runs[d.s.w].current()
	ctx = idempotency.WithKey(ctx, idempotency.Derive(pairID, runID, call.ID()))
	if d.guarded == nil {
		return d.inner.Dispatch(ctx, call, r)
	}
	if sd, ok := d.inner.(*servingDispatcher); ok && sd.serves(call) {
		// A resumed run's call whose outcome is recorded was asked about
		// (or needed no answer) when it first ran: its outcome is served,
		// and nobody is asked again.
		return d.inner.Dispatch(ctx, call, r)
	}
	asker, _ := r.(interaction.Asker)
	ctx = context.WithValue(ctx, scopeKey{}, &callScope{
		pairID: pairID, worker: d.s.c.role(d.s.w), runID: runID, asker: asker,
	})
	return d.guarded.Dispatch(ctx, call, r)
}

func (c *crew) role(w int) string { return c.workers[w].Role() }
