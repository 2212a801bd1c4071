package telemetry_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/spice-orch/spice-orch/telemetry"
)

// metrics is a meter provider read by hand.
type metrics struct {
	mp     *sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
}

func newMetrics(t testing.TB) *metrics {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return &metrics{mp: mp, reader: r}
}

// points collects every data point as one sorted line each:
// "name{k=v,...} value", a histogram's value being "count=N sum=S".
func (m *metrics) points(t testing.TB) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, m.reader.Collect(context.Background(), &rm))
	var out []string
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, telemetry.ScopeName, sm.Scope.Name)
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s{%s} count=%d sum=%d", mt.Name, set(p.Attributes), p.Count, p.Sum))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s{%s} count=%d sum=%g", mt.Name, set(p.Attributes), p.Count, p.Sum))
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s{%s} %d", mt.Name, set(p.Attributes), p.Value))
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s{%s} %d", mt.Name, set(p.Attributes), p.Value))
				}
			default:
				t.Fatalf("unexpected metric type %T of %s", d, mt.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

func set(s attribute.Set) string {
	var kvs []string
	for _, kv := range s.ToSlice() {
		kvs = append(kvs, string(kv.Key)+"="+kv.Value.Emit())
	}
	return strings.Join(kvs, ",")
}

// TestD3_MetricsOfTheBuiltinPair checks every metric the built-in pair
// records: tokens and durations per model operation (from the events'
// injected times: 1 ms a clock reading, 40 readings inside the eight
// operations), tool calls by outcome, and the
// pair's end by reason.
func TestD3_MetricsOfTheBuiltinPair(t *testing.T) {
	m := newMetrics(t)
	cfg := telemetryConfig()
	cfg.MeterProvider = m.mp
	tel, err := telemetry.New(cfg)
	require.NoError(t, err)
	_, _, err = play(t, context.Background(), builtinPair(t, tel))
	require.NoError(t, err)
	const chat = "gen_ai.operation.name=chat,gen_ai.provider.name=spice_orch.scripted,gen_ai.request.model=scripted-1"
	require.Equal(t, []string{
		"gen_ai.client.operation.duration{" + chat + "} count=8 sum=0.04",
		"gen_ai.client.token.usage{" + chat + ",gen_ai.token.type=input} count=8 sum=1860",
		"gen_ai.client.token.usage{" + chat + ",gen_ai.token.type=output} count=8 sum=640",
		"spice_orch.pairs.ended{gen_ai.workflow.name=review_loop,spice_orch.pair.reason=approved} 1",
		"spice_orch.tool.calls{gen_ai.tool.name=fs.read,spice_orch.tool.outcome=ok} 2",
		"spice_orch.tool.calls{gen_ai.tool.name=fs.write,spice_orch.tool.outcome=ok} 2",
		"spice_orch.tool.calls{gen_ai.tool.name=text.stats,spice_orch.tool.outcome=ok} 2",
	}, m.points(t))
}

// TestD3_MetricsOfFailures checks the failed tool call and the failed
// and cancelled pairs in metrics.
func TestD3_MetricsOfFailures(t *testing.T) {
	m := newMetrics(t)
	tel, err := telemetry.New(telemetry.Config{MeterProvider: m.mp})
	require.NoError(t, err)
	_, _, err = play(t, context.Background(), failingToolPair(t, tel))
	require.Error(t, err)
	require.Equal(t, []string{
		"gen_ai.client.operation.duration{gen_ai.operation.name=chat,gen_ai.provider.name=spice_orch.unknown,gen_ai.request.model=scripted-1} count=1 sum=0.001",
		"gen_ai.client.token.usage{gen_ai.operation.name=chat,gen_ai.provider.name=spice_orch.unknown,gen_ai.request.model=scripted-1,gen_ai.token.type=input} count=1 sum=12",
		"gen_ai.client.token.usage{gen_ai.operation.name=chat,gen_ai.provider.name=spice_orch.unknown,gen_ai.request.model=scripted-1,gen_ai.token.type=output} count=1 sum=3",
		"spice_orch.pairs.ended{gen_ai.workflow.name=relay,spice_orch.pair.reason=worker_failed} 1",
		"spice_orch.tool.calls{gen_ai.tool.name=disk.write,spice_orch.tool.outcome=definitive} 1",
	}, m.points(t))
}

// TestD3_SchedulerGaugesAreReadWhenCollected reads queue depth, running pairs and model
// operations in flight when the metrics are collected, and stops after
// unregistering.
func TestD3_SchedulerGaugesAreReadWhenCollected(t *testing.T) {
	m := newMetrics(t)
	tel, err := telemetry.New(telemetry.Config{MeterProvider: m.mp})
	require.NoError(t, err)
	stats := telemetry.SchedulerStats{Queued: 3, Running: 2, ModelOps: 1}
	unregister, err := tel.ObserveScheduler(func() telemetry.SchedulerStats { return stats })
	require.NoError(t, err)
	require.Equal(t, []string{
		"spice_orch.scheduler.model_operations.active{} 1",
		"spice_orch.scheduler.pairs.running{} 2",
		"spice_orch.scheduler.queue.depth{} 3",
	}, m.points(t))
	stats = telemetry.SchedulerStats{Queued: 0, Running: 4}
	require.Contains(t, m.points(t), "spice_orch.scheduler.pairs.running{} 4")
	require.NoError(t, unregister())
	require.Empty(t, m.points(t))

	// A panicking read is contained and counted.
	_, err = tel.ObserveScheduler(func() telemetry.SchedulerStats { panic("boom") })
	require.NoError(t, err)
	var rm metricdata.ResourceMetrics
	_ = m.reader.Collect(context.Background(), &rm)
	require.Equal(t, uint64(1), tel.Stats().Failures)
}
