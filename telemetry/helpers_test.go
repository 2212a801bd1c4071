package telemetry_test

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/providers/scripted"
	"github.com/spice-orch/spice-orch/telemetry"
	"github.com/spice-orch/spice-orch/tools"
	"github.com/spice-orch/spice-orch/workers"
)

const pairID = "pair-1"

// tracing is an SDK tracer provider that exports every span as it ends
// into memory, with the package's ID generator and an empty resource.
type tracing struct {
	tp  *sdktrace.TracerProvider
	exp *tracetest.InMemoryExporter
}

func newTracing(t testing.TB) *tracing {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(resource.Empty()),
		sdktrace.WithIDGenerator(telemetry.IDGenerator()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &tracing{tp: tp, exp: exp}
}

func (tr *tracing) telemetry(t testing.TB, cfg telemetry.Config) *telemetry.Telemetry {
	t.Helper()
	cfg.TracerProvider = tr.tp
	tel, err := telemetry.New(cfg)
	require.NoError(t, err)
	return tel
}

// builtinPair is the CLI's built-in review pair: the built-in writer and
// reviewer scripts, the real file tools in a temporary workspace, run IDs
// "pair-1/<role>/run-N", an injected clock, and tel observing the
// timeline (best effort).
func builtinPair(t testing.TB, obs eventlog.Observer) orchestrator.Config {
	t.Helper()
	ts, err := tools.New(tools.Config{Root: t.TempDir()})
	require.NoError(t, err)
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: ts})
	require.NoError(t, err)
	pl, err := plan.New("plan-1", d)
	require.NoError(t, err)
	plans, err := plan.NewMemory(pl)
	require.NoError(t, err)
	w, r := scripted.Builtin()
	clock := &enginetest.Clock{}
	worker := func(role string, s scripted.Script) workers.Config {
		prov, err := scripted.NewProvider(s)
		require.NoError(t, err)
		return workers.Config{Role: role, Definition: definition(t, role),
			Engine: engine.Config{Provider: prov, IDs: &id.Counter{Prefix: pairID + "/" + role + "/"}, Clock: clock}}
	}
	cfg := orchestrator.Config{
		ID: pairID, Plans: plans, Clock: clock,
		First: worker(scripted.WriterName, w), Second: worker(scripted.ReviewerName, r),
		Pattern: orchestrator.ReviewLoop, Task: "Write a short note on small packages.", MaxRounds: 3,
	}
	if obs != nil {
		cfg.Timeline = orchestrator.TimelineConfig{BestEffort: []eventlog.Observer{obs}, Mailbox: telemetry.Mailbox}
	}
	return cfg
}

// scriptedPair is a pair of two enginetest providers with the given
// scripts and tools.
func scriptedPair(t testing.TB, obs eventlog.Observer, pattern orchestrator.Pattern, first, second [][]model.Item, ts ...tool.Tool) orchestrator.Config {
	t.Helper()
	plans, err := enginetest.Plan("plan-1", ts...)
	require.NoError(t, err)
	clock := &enginetest.Clock{}
	cfg := orchestrator.Config{
		ID: pairID, Plans: plans, Clock: clock,
		First: workers.Config{Role: "writer", Definition: definition(t, "writer"),
			Engine: engine.Config{Provider: enginetest.NewProvider(first...), IDs: &id.Counter{Prefix: "w-"}, Clock: clock}},
		Second: workers.Config{Role: "reviewer", Definition: definition(t, "reviewer"),
			Engine: engine.Config{Provider: enginetest.NewProvider(second...), IDs: &id.Counter{Prefix: "r-"}, Clock: clock}},
		Pattern: pattern, Task: "Say hello.",
	}
	if obs != nil {
		cfg.Timeline = orchestrator.TimelineConfig{BestEffort: []eventlog.Observer{obs}, Mailbox: telemetry.Mailbox}
	}
	return cfg
}

func definition(t testing.TB, role string) engine.Definition {
	t.Helper()
	d, err := engine.NewDefinition(engine.DefinitionConfig{Name: role, Model: "scripted-1", System: "Be brief.", MaxTurns: 4})
	require.NoError(t, err)
	return d
}

// play runs the pair on the test goroutine. When it returns, the
// timeline is closed, and Close waited for its best-effort observers.
func play(t testing.TB, ctx context.Context, cfg orchestrator.Config) (*orchestrator.Pair, orchestrator.Result, error) {
	t.Helper()
	p, err := orchestrator.Run(ctx, cfg)
	require.NoError(t, err)
	res, err := p.Wait(context.Background())
	return p, res, err
}

// events reads a finished pair's whole timeline.
func events(t testing.TB, p *orchestrator.Pair) []eventlog.Event {
	t.Helper()
	sub, err := p.Subscribe(context.Background(), 0)
	require.NoError(t, err)
	evs, err := enginetest.ReadAll(context.Background(), sub)
	require.NoError(t, err)
	return evs
}

// jsonLines encodes a timeline as `run --json` prints it.
func jsonLines(evs []eventlog.Event) string {
	var b []byte
	for _, e := range evs {
		b = append(e.AppendJSON(b), '\n')
	}
	return string(b)
}

// tree draws spans as an indented tree, children in start order: each
// line is the span's name, its kind when not internal, and its error
// status with error.type.
func tree(spans tracetest.SpanStubs) string {
	children := map[string][]tracetest.SpanStub{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID().String()] = true
	}
	for _, s := range spans {
		parent := ""
		if p := s.Parent.SpanID(); p.IsValid() && ids[p.String()] {
			parent = p.String()
		}
		children[parent] = append(children[parent], s)
	}
	var b strings.Builder
	var draw func(parent string, depth int)
	draw = func(parent string, depth int) {
		cs := children[parent]
		slices.SortStableFunc(cs, func(a, b tracetest.SpanStub) int {
			return cmp.Or(a.StartTime.Compare(b.StartTime), strings.Compare(a.Name, b.Name))
		})
		for _, s := range cs {
			b.WriteString(strings.Repeat("  ", depth) + s.Name)
			if s.SpanKind != 1 { // trace.SpanKindInternal
				b.WriteString(" [" + s.SpanKind.String() + "]")
			}
			if s.Status.Code == codes.Error {
				b.WriteString(" ERROR " + attr(s, "error.type"))
			}
			b.WriteString("\n")
			draw(s.SpanContext.SpanID().String(), depth+1)
		}
	}
	draw("", 0)
	return b.String()
}

// attr returns a span attribute as text, "" when it is absent.
func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// named returns the spans with this name, in start order.
func named(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	return out
}

// attrs returns the listed attributes of s as "key=value" lines.
func attrs(s tracetest.SpanStub, keys ...string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+attr(s, k))
	}
	return out
}

func telemetryConfig() telemetry.Config {
	return telemetry.Config{Providers: map[string]string{"writer": "spice_orch.scripted", "reviewer": "spice_orch.scripted"}}
}
