package plan_test

import (
	"context"
	"testing"

	"github.com/spice-orch/spice-orch/kernel/plan"
)

// One run's lease and release on the in-memory source: the per-run cost the
// engine pays.
func BenchmarkLeaseRelease(b *testing.B) {
	m, err := plan.NewMemory(newPlan(b, "plan-1", baseConfigs()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := m.Lease(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNew(b *testing.B) {
	d := dispatcherOf(b, baseConfigs())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := plan.New("plan-1", d); err != nil {
			b.Fatal(err)
		}
	}
}
