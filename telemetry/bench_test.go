package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/telemetry"
	"github.com/spice-orch/spice-orch/workers"
)

// relayConfig is orchestrator's BenchmarkPairRelay pair: two text workers
// with cycling scripted providers, one handoff, AfterRun delivery, no
// budgets; obs, if set, observes the timeline best effort.
func relayConfig(b *testing.B, obs eventlog.Observer) orchestrator.Config {
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
	cfg := orchestrator.Config{
		ID: "pair-bench", Plans: plans,
		First: workers.Config{Role: "writer", Definition: def("writer"),
			Engine: engine.Config{Provider: provider("Hello there."), IDs: ids, Clock: clock}},
		Second: workers.Config{Role: "reviewer", Definition: def("reviewer"),
			Engine: engine.Config{Provider: provider("Looks good."), IDs: ids, Clock: clock}},
		Pattern:  orchestrator.Relay,
		Task:     "Say hello.",
		Timeline: orchestrator.TimelineConfig{Delivery: orchestrator.AfterRun},
	}
	if obs != nil {
		cfg.Timeline.BestEffort = []eventlog.Observer{obs}
		cfg.Timeline.Mailbox = telemetry.Mailbox
	}
	return cfg
}

// BenchmarkPairRelayTelemetry is BenchmarkPairRelay (one Team playing the
// relay pair) with telemetry off (no observer: what `run` without --otel
// does) and on: traces into the SDK's in-memory exporter through a
// synchronous processor, and every metric into a manual reader. A pair
// ends only after its timeline's observers drained (eventlog Close), so
// the drawing is inside each iteration. The README reports the ratio.
func BenchmarkPairRelayTelemetry(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchRelay(b, relayConfig(b, nil), nil) })
	b.Run("otel", func(b *testing.B) {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(resource.Empty()),
			sdktrace.WithIDGenerator(telemetry.IDGenerator()))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		m := newMetrics(b)
		tel, err := telemetry.New(telemetry.Config{TracerProvider: tp, MeterProvider: m.mp,
			Providers: map[string]string{"writer": "spice_orch.scripted", "reviewer": "spice_orch.scripted"}})
		if err != nil {
			b.Fatal(err)
		}
		benchRelay(b, relayConfig(b, tel), exp)
		if n := len(exp.GetSpans()); n == 0 {
			b.Fatal("no spans drawn")
		}
	})
}

func benchRelay(b *testing.B, cfg orchestrator.Config, exp *tracetest.InMemoryExporter) {
	ctx := context.Background()
	team, err := orchestrator.NewTeam(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = team.Close(ctx) }()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		p, err := team.Run(ctx, cfg.ID, cfg.Task)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		// Keep the exporter's memory bounded without emptying it at the end.
		if n++; exp != nil && n%1024 == 0 {
			exp.Reset()
		}
	}
}
