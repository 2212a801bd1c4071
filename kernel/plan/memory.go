package plan

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
)

// DefaultMaxRetained is how many plans a Memory keeps leasable by exact ID
// when MemoryConfig.MaxRetained is zero.
const DefaultMaxRetained = 8

// MemoryConfig is the input to NewMemoryWith.
type MemoryConfig struct {
	// Initial is the first current plan. Required.
	Initial Plan
	// MaxRetained bounds the plans kept leasable by exact ID, the current
	// one included; zero means DefaultMaxRetained, negative is an error.
	MaxRetained int
	// Lease configures every lease the source hands out.
	Lease LeaseConfig
}

// MemoryStats is a point-in-time view of a Memory.
type MemoryStats struct {
	Current     ID
	Retained    int    // plans leasable by exact ID
	Outstanding int    // unreleased leases over all plans
	Activations uint64 // successful Activate calls plus the initial plan
	Evictions   uint64 // plans dropped from retention
}

// Memory is an in-memory Source, safe for concurrent use.
//
// Activate switches the current plan atomically; it affects only leases
// taken afterwards, and a lease already handed out keeps its plan (K12).
//
// Retention: every activated plan stays leasable by exact ID until it is
// evicted. After each Activate and each release, while more than
// MaxRetained plans are retained, the oldest plan that is not current and
// has no outstanding lease is evicted. A plan with outstanding leases is
// never evicted, so retention may exceed MaxRetained until those leases are
// released. IDs are remembered forever, evicted or not, so an ID is never
// activated twice; that set grows by one short string per activation.
type Memory struct {
	leaseCfg    LeaseConfig
	maxRetained int

	mu          sync.Mutex
	current     *entry
	retained    []*entry // activation order, oldest first
	byID        map[ID]*entry
	used        map[ID]struct{}
	outstanding int
	activations uint64
	evictions   uint64
}

type entry struct {
	plan        Plan
	outstanding int
	release     func() error // decrements outstanding; one per entry
}

// NewMemory returns a Memory whose current plan is initial, with default
// retention and lease settings.
func NewMemory(initial Plan) (*Memory, error) {
	return NewMemoryWith(MemoryConfig{Initial: initial})
}

// NewMemoryWith validates cfg and returns a Memory.
func NewMemoryWith(cfg MemoryConfig) (*Memory, error) {
	if cfg.Initial.IsZero() {
		return nil, bound.Missing("memory.initial")
	}
	maxRetained := cfg.MaxRetained
	switch {
	case maxRetained == 0:
		maxRetained = DefaultMaxRetained
	case maxRetained < 0:
		return nil, bound.Malformedf("memory.max_retained", "must not be negative")
	}
	if cfg.Lease.ReleaseTimeout < 0 {
		return nil, bound.Malformedf("lease.release_timeout", "must not be negative")
	}
	// The Memory's release callback is its own reference decrement under
	// its mutex: it never blocks, so it runs inline (LeaseConfig.Inline).
	leaseCfg := cfg.Lease
	leaseCfg.Inline = true
	m := &Memory{
		leaseCfg:    leaseCfg,
		maxRetained: maxRetained,
		byID:        make(map[ID]*entry),
		used:        make(map[ID]struct{}),
	}
	m.add(cfg.Initial)
	return m, nil
}

// Activate makes p the current plan for leases taken from now on. It fails
// with an error matching ErrPlanReused when p's ID was activated before,
// and leaves the current plan unchanged.
func (m *Memory) Activate(p Plan) error {
	if p.IsZero() {
		return bound.Missing("plan")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.used[p.ID()]; ok {
		return &IDError{ID: p.ID(), Err: ErrPlanReused}
	}
	m.add(p)
	m.evict()
	return nil
}

// add makes p current; m.mu is held or m is not yet shared.
func (m *Memory) add(p Plan) {
	e := &entry{plan: p}
	e.release = func() error { return m.release(e) }
	m.current = e
	m.retained = append(m.retained, e)
	m.byID[p.ID()] = e
	m.used[p.ID()] = struct{}{}
	m.activations++
}

// Current returns the plan the next Lease will carry.
func (m *Memory) Current() Plan {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.current.plan
}

// Lease returns a lease on the current plan, or ctx.Err() if ctx is done.
func (m *Memory) Lease(ctx context.Context) (*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	e := m.take(m.current)
	m.mu.Unlock()
	return m.newLease(e)
}

// LeaseExact returns a lease on the retained plan named planID. It fails
// with a *bound.Error for a malformed ID and with an error matching
// ErrUnknownPlan when the plan was never activated or has been evicted.
func (m *Memory) LeaseExact(ctx context.Context, planID ID) (*Lease, error) {
	if err := id.Check("plan.id", string(planID)); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	e, ok := m.byID[planID]
	if ok {
		m.take(e)
	}
	m.mu.Unlock()
	if !ok {
		return nil, &IDError{ID: planID, Err: ErrUnknownPlan}
	}
	return m.newLease(e)
}

// take counts a new lease on e; m.mu is held.
func (m *Memory) take(e *entry) *entry {
	e.outstanding++
	m.outstanding++
	return e
}

func (m *Memory) newLease(e *entry) (*Lease, error) {
	l, err := NewLease(e.plan, e.release, m.leaseCfg)
	if err != nil {
		// Unreachable: the plan is valid and the config was checked in
		// NewMemoryWith. Give the count back so it cannot leak.
		m.mu.Lock()
		m.give(e)
		m.mu.Unlock()
		return nil, err
	}
	return l, nil
}

var errOverRelease = errors.New("plan: release without an outstanding lease")

// release is an entry's lease callback: a reference decrement, never
// blocking beyond the mutex.
func (m *Memory) release(e *entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.outstanding == 0 {
		return errOverRelease
	}
	m.give(e)
	m.evict()
	return nil
}

func (m *Memory) give(e *entry) {
	e.outstanding--
	m.outstanding--
}

// evict drops the oldest idle, non-current plans while over the bound.
func (m *Memory) evict() {
	for len(m.retained) > m.maxRetained {
		i := slices.IndexFunc(m.retained, func(e *entry) bool {
			return e != m.current && e.outstanding == 0
		})
		if i < 0 {
			return
		}
		delete(m.byID, m.retained[i].plan.ID())
		m.retained[i] = nil
		m.retained = slices.Delete(m.retained, i, i+1)
		m.evictions++
	}
}

// Outstanding returns the number of unreleased leases on the plan named
// planID (zero for a plan the source does not retain).
func (m *Memory) Outstanding(planID ID) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.byID[planID]; ok {
		return e.outstanding
	}
	return 0
}

// Stats returns a snapshot of the source's counters.
func (m *Memory) Stats() MemoryStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return MemoryStats{
		Current:     m.current.plan.ID(),
		Retained:    len(m.retained),
		Outstanding: m.outstanding,
		Activations: m.activations,
		Evictions:   m.evictions,
	}
}
