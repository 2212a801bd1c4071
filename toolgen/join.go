package toolgen

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// JoinConfig configures a Joined source.
type JoinConfig struct {
	// PlanPrefix names the joined plans: PlanPrefix-1, PlanPrefix-2, ...
	// Required.
	PlanPrefix string
	// Compiled are the tools of every joined plan before the sources'.
	Compiled []tool.Tool
	// Sources are leased together for each joined lease. Their tool
	// names must not collide with each other's or the compiled tools'.
	Sources []plan.Source
	// MaxRetainedPlans bounds the joined plans kept for LeaseExact;
	// zero means DefaultMaxRetainedPlans.
	MaxRetainedPlans int
}

// Joined is a plan.Source whose plan is the compiled tools beside the
// current plans of several sources: a pair's own tools over generations
// that pairs share, or the generations of plugins beside those of MCP
// servers. A joined lease holds a lease of every source, so each keeps
// its generations for as long as the joined plan is in use; a change in
// any source gives the next lease a new joined plan.
type Joined struct {
	cfg JoinConfig

	mu    sync.Mutex
	seq   uint64
	byKey map[string]*joinEntry
	byID  map[plan.ID]*joinEntry
	order []*joinEntry // oldest first
}

type joinEntry struct {
	plan   plan.Plan
	key    string
	inner  []plan.ID
	leases int
}

var _ plan.Source = (*Joined)(nil)

// Join validates cfg and returns the joined source. It leases nothing
// until asked.
func Join(cfg JoinConfig) (*Joined, error) {
	if cfg.PlanPrefix == "" {
		return nil, bound.Missing("join.plan_prefix")
	}
	if len(cfg.Sources) == 0 {
		return nil, bound.Missing("join.sources")
	}
	for _, s := range cfg.Sources {
		if s == nil {
			return nil, bound.Missing("join.sources")
		}
	}
	if cfg.MaxRetainedPlans < 0 {
		return nil, bound.Malformedf("join", "counts must not be negative")
	}
	if cfg.MaxRetainedPlans == 0 {
		cfg.MaxRetainedPlans = DefaultMaxRetainedPlans
	}
	return &Joined{cfg: cfg, byKey: map[string]*joinEntry{}, byID: map[plan.ID]*joinEntry{}}, nil
}

// Lease leases the current plan of every source and returns a lease on
// their join.
func (j *Joined) Lease(ctx context.Context) (*plan.Lease, error) {
	ls := make([]*plan.Lease, 0, len(j.cfg.Sources))
	for _, s := range j.cfg.Sources {
		l, err := s.Lease(ctx)
		if err != nil {
			releaseAll(ls)
			return nil, err
		}
		ls = append(ls, l)
	}
	return j.join(ls)
}

// LeaseExact leases the joined plan planID again while it is retained
// and every source still holds its part.
func (j *Joined) LeaseExact(ctx context.Context, planID plan.ID) (*plan.Lease, error) {
	j.mu.Lock()
	e, ok := j.byID[planID]
	var inner []plan.ID
	if ok {
		inner = e.inner
	}
	j.mu.Unlock()
	if !ok {
		return nil, &plan.IDError{ID: planID, Err: plan.ErrUnknownPlan}
	}
	ls := make([]*plan.Lease, 0, len(inner))
	for i, s := range j.cfg.Sources {
		l, err := s.LeaseExact(ctx, inner[i])
		if err != nil {
			releaseAll(ls)
			return nil, err
		}
		ls = append(ls, l)
	}
	return j.join(ls)
}

// Inner returns the plans of the sources that the joined plan planID
// holds, in the order of Sources; false once it is not retained.
func (j *Joined) Inner(planID plan.ID) ([]plan.ID, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.byID[planID]
	if !ok {
		return nil, false
	}
	return append([]plan.ID(nil), e.inner...), true
}

func releaseAll(ls []*plan.Lease) {
	for _, l := range ls {
		_ = l.Release(context.Background())
	}
}

// join returns a lease on the joined plan of ls, which it releases with
// it.
func (j *Joined) join(ls []*plan.Lease) (*plan.Lease, error) {
	inner := make([]plan.ID, len(ls))
	for i, l := range ls {
		inner[i] = l.Plan().ID()
	}
	key := keyOf(inner)
	j.mu.Lock()
	e, ok := j.byKey[key]
	if !ok {
		pl, err := j.newPlan(ls)
		if err != nil {
			j.mu.Unlock()
			releaseAll(ls)
			return nil, err
		}
		e = &joinEntry{plan: pl, key: key, inner: inner}
		j.byKey[key], j.byID[pl.ID()] = e, e
		j.order = append(j.order, e)
	}
	e.leases++
	j.evict()
	j.mu.Unlock()
	release := func() error {
		j.mu.Lock()
		e.leases--
		j.evict()
		j.mu.Unlock()
		var errs []error
		for _, l := range ls {
			errs = append(errs, l.Release(context.Background()))
		}
		return errors.Join(errs...)
	}
	l, err := plan.NewLease(e.plan, release, plan.LeaseConfig{Inline: true})
	if err != nil {
		_ = release()
		return nil, err
	}
	return l, nil
}

// keyOf names a combination of inner plans. Plan IDs hold no NUL.
func keyOf(ids []plan.ID) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(string(id))
		b.WriteByte(0)
	}
	return b.String()
}

// newPlan builds the joined plan of ls. With j.mu.
func (j *Joined) newPlan(ls []*plan.Lease) (plan.Plan, error) {
	tools := append([]tool.Tool(nil), j.cfg.Compiled...)
	for _, l := range ls {
		d := l.Plan().Dispatcher()
		for def := range l.Plan().Definitions() {
			tools = append(tools, &forward{def: def, d: d})
		}
	}
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: tools})
	if err != nil {
		return plan.Plan{}, err
	}
	pl, err := plan.New(plan.ID(j.cfg.PlanPrefix+"-"+strconv.FormatUint(j.seq+1, 10)), d)
	if err != nil {
		return plan.Plan{}, err
	}
	j.seq++
	return pl, nil
}

// evict drops the oldest unleased joined plans beyond the bound. With
// j.mu.
func (j *Joined) evict() {
	for len(j.order) > j.cfg.MaxRetainedPlans {
		i := -1
		for k, e := range j.order {
			if e.leases == 0 {
				i = k
				break
			}
		}
		if i < 0 {
			return
		}
		e := j.order[i]
		delete(j.byKey, e.key)
		delete(j.byID, e.plan.ID())
		j.order = append(j.order[:i], j.order[i+1:]...)
	}
}

// forward is a tool of an inner plan: its call goes through that plan's
// dispatcher, whose outcome is already settled and typed.
type forward struct {
	def tool.Definition
	d   tool.Dispatcher
}

func (f *forward) Definition() tool.Definition { return f.def }

func (f *forward) Execute(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
	res, err := f.d.Dispatch(ctx, call, r)
	// The outer dispatcher records a reporter failure itself: only the
	// execution error goes up.
	var df *tool.DispatchFailure
	if errors.As(err, &df) && df.Execution() != nil {
		return res, df.Execution()
	}
	return res, err
}
