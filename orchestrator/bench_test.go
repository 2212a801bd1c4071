package orchestrator_test

import (
	"context"
	"testing"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/workers"
)

// benchConfig is two text workers with cycling scripted providers, no
// observers and no budgets, so that it measures the pair's own cost.
func benchConfig(b *testing.B, d orchestrator.Delivery) orchestrator.Config {
	b.Helper()
	plans, err := enginetest.Plan("plan-bench")
	if err != nil {
		b.Fatal(err)
	}
	def := func(name string) engine.Definition {
		d, err := engine.NewDefinition(engine.DefinitionConfig{Name: name, Model: "scripted-1", System: "Be brief.", MaxTurns: 4})
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	provider := func(text string) *enginetest.Provider {
		p := enginetest.NewProvider(enginetest.Answer(text))
		p.Cycle = true
		return p
	}
	ids, clock := &id.Counter{}, &enginetest.Clock{}
	return orchestrator.Config{
		ID:    "pair-bench",
		Plans: plans,
		First: workers.Config{Role: "writer", Definition: def("writer"),
			Engine: engine.Config{Provider: provider("Hello there."), IDs: ids, Clock: clock}},
		Second: workers.Config{Role: "reviewer", Definition: def("reviewer"),
			Engine: engine.Config{Provider: provider("Looks good."), IDs: ids, Clock: clock}},
		Pattern:  orchestrator.Relay,
		Task:     "Say hello.",
		Timeline: orchestrator.TimelineConfig{Delivery: d},
	}
}

func benchPair(b *testing.B, cfg orchestrator.Config) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := orchestrator.Run(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// benchTeam plays the pairs of cfg on one Team, as a host that runs the
// same two workers task after task does.
func benchTeam(b *testing.B, cfg orchestrator.Config) {
	ctx := context.Background()
	t, err := orchestrator.NewTeam(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = t.Close(ctx) })
	b.ReportAllocs()
	for b.Loop() {
		p, err := t.Run(ctx, cfg.ID, cfg.Task)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPairRelay is the table's pair: two text workers, one handoff,
// the pair timeline on (every run event relayed into it), scripted
// providers, the pair and both runs on the benchmark goroutine. The pairs
// are played by one Team, which lends each pair the workers the last one
// gave back, as a host running the same two workers task after task does.
// Events are relayed as each run ends (AfterRun), which keeps the worker
// engines free of observers.
func BenchmarkPairRelay(b *testing.B) { benchTeam(b, benchConfig(b, orchestrator.AfterRun)) }

// BenchmarkPairRelayLive is the same pair with Live delivery: every run
// event reaches the timeline as its run commits it, through a required
// observer on each worker's engine.
func BenchmarkPairRelayLive(b *testing.B) { benchTeam(b, benchConfig(b, orchestrator.Live)) }

// BenchmarkPairRelayCold is BenchmarkPairRelay with the package-level Run:
// every pair builds its two workers' engines, and closes them at its end.
func BenchmarkPairRelayCold(b *testing.B) { benchPair(b, benchConfig(b, orchestrator.AfterRun)) }
