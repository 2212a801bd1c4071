package plan_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/plan"
)

var _ plan.Source = (*plan.Memory)(nil)

func newMemory(t testing.TB, cfg plan.MemoryConfig) *plan.Memory {
	t.Helper()
	m, err := plan.NewMemoryWith(cfg)
	require.NoError(t, err)
	return m
}

func lease(t testing.TB, s plan.Source) *plan.Lease {
	t.Helper()
	l, err := s.Lease(context.Background())
	require.NoError(t, err)
	return l
}

// exact is a Source view that always leases one plan ID.
type exact struct {
	*plan.Memory
	id plan.ID
}

func (e exact) Lease(ctx context.Context) (*plan.Lease, error) { return e.LeaseExact(ctx, e.id) }

func release(t testing.TB, l *plan.Lease) {
	t.Helper()
	require.NoError(t, l.Release(context.Background()))
}

func TestK12_ActivateAffectsOnlyLaterLeases(t *testing.T) {
	p1 := newPlan(t, "plan-1", baseConfigs())
	p2 := newPlan(t, "plan-2", baseConfigs()[:1])
	m, err := plan.NewMemory(p1)
	require.NoError(t, err)

	held := lease(t, m)
	require.Equal(t, p1.Identity(), held.Plan().Identity())

	require.NoError(t, m.Activate(p2))
	require.Equal(t, p2.Identity(), m.Current().Identity())

	// The run that leased before activation keeps its plan and dispatcher.
	require.Equal(t, p1.Identity(), held.Plan().Identity())
	require.Same(t, p1.Dispatcher(), held.Plan().Dispatcher())
	require.Equal(t, 3, held.Plan().Len())

	later := lease(t, m)
	require.Equal(t, p2.Identity(), later.Plan().Identity())
	require.Equal(t, 1, later.Plan().Len())

	require.Equal(t, 1, m.Outstanding("plan-1"))
	require.Equal(t, 1, m.Outstanding("plan-2"))
	release(t, held)
	release(t, later)
	require.Zero(t, m.Outstanding("plan-1"))
	require.Zero(t, m.Outstanding("plan-2"))
	st := m.Stats()
	require.Equal(t, plan.MemoryStats{Current: "plan-2", Retained: 2, Activations: 2}, st)
}

func TestK12_LeaseExactID(t *testing.T) {
	p1 := newPlan(t, "plan-1", baseConfigs())
	p2 := newPlan(t, "plan-2", baseConfigs()[:1])
	m := newMemory(t, plan.MemoryConfig{Initial: p1})
	require.NoError(t, m.Activate(p2))

	// An older plan stays leasable by its exact ID after a newer one is
	// activated, and matches its recorded identity.
	l, err := m.LeaseExact(context.Background(), "plan-1")
	require.NoError(t, err)
	require.NoError(t, l.Plan().Matches(p1.Identity()))
	require.Equal(t, 1, m.Outstanding("plan-1"))
	release(t, l)
	require.Zero(t, m.Outstanding("plan-1"))

	// A plan the source never activated is a typed unknown-plan error.
	_, err = m.LeaseExact(context.Background(), "plan-9")
	require.ErrorIs(t, err, plan.ErrUnknownPlan)
	var ie *plan.IDError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, plan.ID("plan-9"), ie.ID)

	// A malformed ID is a validation error, checked before anything else.
	_, err = m.LeaseExact(context.Background(), "plan 9")
	require.ErrorIs(t, err, bound.ErrInvalid)

	// A done context is reported as such and counts nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = m.LeaseExact(ctx, "plan-1")
	require.ErrorIs(t, err, context.Canceled)
	_, err = m.Lease(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, m.Stats().Outstanding)
}

func TestK12_RetentionEvictsOnlyIdlePlans(t *testing.T) {
	p := func(i int) plan.Plan { return newPlan(t, plan.ID("plan-"+strconv.Itoa(i)), baseConfigs()) }
	m := newMemory(t, plan.MemoryConfig{Initial: p(1), MaxRetained: 2})

	pinned := lease(t, m) // holds plan-1
	require.NoError(t, m.Activate(p(2)))
	require.NoError(t, m.Activate(p(3)))
	require.NoError(t, m.Activate(p(4)))

	// plan-2 and plan-3 were idle and old, plan-1 is held: it survives
	// beyond the bound; plan-4 is current.
	_, err := m.LeaseExact(context.Background(), "plan-2")
	require.ErrorIs(t, err, plan.ErrUnknownPlan)
	_, err = m.LeaseExact(context.Background(), "plan-3")
	require.ErrorIs(t, err, plan.ErrUnknownPlan)
	again, err := m.LeaseExact(context.Background(), "plan-1")
	require.NoError(t, err)
	require.Equal(t, 2, m.Outstanding("plan-1"))
	require.Equal(t, 2, m.Stats().Retained)

	// Released, it is idle but within the bound, so still leasable.
	release(t, pinned)
	require.Equal(t, 1, m.Outstanding("plan-1"))
	release(t, again)
	release(t, lease(t, exact{m, "plan-1"}))

	// The next activation pushes it out as the oldest idle plan.
	require.NoError(t, m.Activate(p(5)))
	_, err = m.LeaseExact(context.Background(), "plan-1")
	require.ErrorIs(t, err, plan.ErrUnknownPlan)
	require.Equal(t, plan.MemoryStats{Current: "plan-5", Retained: 2, Activations: 5, Evictions: 3}, m.Stats())
}

func TestK12_PlanIDNotReusable(t *testing.T) {
	p1 := newPlan(t, "plan-1", baseConfigs())
	m := newMemory(t, plan.MemoryConfig{Initial: p1, MaxRetained: 1})

	// Re-activating the current plan, or any plan under a used ID, fails.
	err := m.Activate(p1)
	require.ErrorIs(t, err, plan.ErrPlanReused)
	var ie *plan.IDError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, plan.ID("plan-1"), ie.ID)
	require.ErrorIs(t, m.Activate(newPlan(t, "plan-1", baseConfigs()[:1])), plan.ErrPlanReused)

	// Still refused after the plan has been evicted and is gone.
	require.NoError(t, m.Activate(newPlan(t, "plan-2", baseConfigs())))
	_, err = m.LeaseExact(context.Background(), "plan-1")
	require.ErrorIs(t, err, plan.ErrUnknownPlan)
	require.ErrorIs(t, m.Activate(newPlan(t, "plan-1", baseConfigs())), plan.ErrPlanReused)

	// A refused activation leaves the current plan alone.
	require.Equal(t, plan.ID("plan-2"), m.Current().ID())
	require.Equal(t, uint64(2), m.Stats().Activations)

	require.ErrorIs(t, m.Activate(plan.Plan{}), bound.ErrInvalid)
}

func TestK12_ConcurrentLeaseAndActivate(t *testing.T) {
	const (
		plans   = 40
		leasers = 8
		rounds  = 200
	)
	all := make([]plan.Plan, plans)
	order := make(map[plan.ID]int, plans)
	for i := range all {
		all[i] = newPlan(t, plan.ID("plan-"+strconv.Itoa(i)), baseConfigs())
		order[all[i].ID()] = i
	}
	m := newMemory(t, plan.MemoryConfig{Initial: all[0], MaxRetained: 3})

	var wg sync.WaitGroup
	errs := make(chan error, leasers+1)
	wg.Go(func() {
		for _, p := range all[1:] {
			if err := m.Activate(p); err != nil {
				errs <- err
				return
			}
		}
	})
	for range leasers {
		wg.Go(func() {
			last := -1
			for i := range rounds {
				var l *plan.Lease
				var err error
				if i%5 == 4 && last >= 0 {
					// Exact leases may lose to eviction: only an
					// unknown-plan error is acceptable then.
					l, err = m.LeaseExact(context.Background(), all[last].ID())
					if errors.Is(err, plan.ErrUnknownPlan) {
						continue
					}
				} else {
					l, err = m.Lease(context.Background())
				}
				if err != nil {
					errs <- err
					return
				}
				got, known := order[l.Plan().ID()]
				switch {
				case !known || l.Plan().Matches(all[got].Identity()) != nil:
					errs <- errors.New("lease carries a plan that was never activated")
				case got < last && i%5 != 4:
					// Activation is atomic and linear: one goroutine never
					// sees the current plan go backwards.
					errs <- errors.New("current plan went backwards")
				}
				last = max(last, got)
				if err := l.Release(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	st := m.Stats()
	require.Zero(t, st.Outstanding)
	require.Equal(t, all[plans-1].ID(), st.Current)
	require.Equal(t, uint64(plans), st.Activations)
	require.LessOrEqual(t, st.Retained, 3, "idle plans beyond the bound are evicted")
	for _, p := range all {
		require.Zero(t, m.Outstanding(p.ID()))
	}
}

func TestK12_NewMemoryRejectsBadConfig(t *testing.T) {
	p := newPlan(t, "plan-1", baseConfigs())
	for name, cfg := range map[string]plan.MemoryConfig{
		"no initial plan":  {},
		"negative retain":  {Initial: p, MaxRetained: -1},
		"negative timeout": {Initial: p, Lease: plan.LeaseConfig{ReleaseTimeout: -1}},
	} {
		_, err := plan.NewMemoryWith(cfg)
		require.ErrorIs(t, err, bound.ErrInvalid, name)
	}
}
