package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
)

// Metric names beside the GenAI ones (gen_ai.client.token.usage and
// gen_ai.client.operation.duration).
const (
	MetricPairsEnded     = "spice_orch.pairs.ended"
	MetricToolCalls      = "spice_orch.tool.calls"
	MetricQueueDepth     = "spice_orch.scheduler.queue.depth"
	MetricRunningPairs   = "spice_orch.scheduler.pairs.running"
	MetricModelOpsActive = "spice_orch.scheduler.model_operations.active"
)

// Bucket boundaries the GenAI semantic conventions advise.
var (
	tokenBuckets = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576,
		4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12,
		10.24, 20.48, 40.96, 81.92}
)

// instruments are the metrics a Telemetry records; a nil *instruments
// records nothing.
type instruments struct {
	meter    metric.Meter
	tokens   genaiconv.ClientTokenUsage
	duration genaiconv.ClientOperationDuration
	ended    metric.Int64Counter
	tools    metric.Int64Counter
}

func newInstruments(m metric.Meter) (*instruments, error) {
	in := &instruments{meter: m}
	var err error
	if in.tokens, err = genaiconv.NewClientTokenUsage(m, metric.WithExplicitBucketBoundaries(tokenBuckets...)); err != nil {
		return nil, err
	}
	if in.duration, err = genaiconv.NewClientOperationDuration(m, metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, err
	}
	if in.ended, err = m.Int64Counter(MetricPairsEnded, metric.WithUnit("{pair}"),
		metric.WithDescription("Pairs that ended, by reason.")); err != nil {
		return nil, err
	}
	if in.tools, err = m.Int64Counter(MetricToolCalls, metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls that ended, by tool and outcome.")); err != nil {
		return nil, err
	}
	return in, nil
}

// chat records one ended model operation: its duration (from the events'
// own times) and, when it completed, its tokens.
func (in *instruments) chat(op *opSpan, at time.Time, errType string, input, output int64, completed bool) {
	if in == nil {
		return
	}
	ctx := context.Background()
	provider := genaiconv.ProviderNameAttr(op.provider)
	if op.provider == "" {
		provider = ProviderUnknown
	}
	attrs := make([]attribute.KeyValue, 0, 4)
	if op.name != "" {
		attrs = append(attrs, in.duration.AttrRequestModel(op.name))
	}
	if op.w != nil && op.w.host != "" {
		attrs = append(attrs, in.duration.AttrServerAddress(op.w.host))
		if op.w.port > 0 {
			attrs = append(attrs, in.duration.AttrServerPort(op.w.port))
		}
	}
	if completed {
		in.tokens.Record(ctx, input, genaiconv.OperationNameChat, provider, genaiconv.TokenTypeInput, attrs...)
		in.tokens.Record(ctx, output, genaiconv.OperationNameChat, provider, genaiconv.TokenTypeOutput, attrs...)
	}
	if errType != "" {
		attrs = append(attrs, in.duration.AttrErrorType(genaiconv.ErrorTypeAttr(errType)))
	}
	d := max(at.Sub(op.at), 0).Seconds()
	in.duration.Record(ctx, d, genaiconv.OperationNameChat, provider, attrs...)
}

func (in *instruments) tool(name, outcome string) {
	if in == nil {
		return
	}
	in.tools.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("gen_ai.tool.name", name),
		attribute.String("spice_orch.tool.outcome", outcome)))
}

func (in *instruments) pairEnded(pattern, reason string) {
	if in == nil {
		return
	}
	in.ended.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("gen_ai.workflow.name", pattern),
		attribute.String("spice_orch.pair.reason", reason)))
}

// SchedulerStats is what the scheduler gauges read: a host adapts its
// scheduler's Stats in one line,
//
//	func() telemetry.SchedulerStats {
//		s := sched.Stats()
//		return telemetry.SchedulerStats{Queued: s.Queued, Running: s.Running, ModelOps: s.ModelOps}
//	}
//
// (this package sits beside the scheduler, not above it).
type SchedulerStats struct {
	Queued, Running, ModelOps int
}

// ObserveScheduler registers observable gauges of a scheduler: queue
// depth, running pairs and model operations in flight, read when the
// metrics are collected. It returns the function that unregisters them.
// Without a MeterProvider it registers nothing.
func (t *Telemetry) ObserveScheduler(read func() SchedulerStats) (unregister func() error, err error) {
	if t.inst == nil || read == nil {
		return func() error { return nil }, nil
	}
	m := t.inst.meter
	queued, err := m.Int64ObservableGauge(MetricQueueDepth, metric.WithUnit("{job}"),
		metric.WithDescription("Jobs waiting in the scheduler's queue."))
	if err != nil {
		return nil, err
	}
	running, err := m.Int64ObservableGauge(MetricRunningPairs, metric.WithUnit("{pair}"),
		metric.WithDescription("Pairs the scheduler is running."))
	if err != nil {
		return nil, err
	}
	ops, err := m.Int64ObservableGauge(MetricModelOpsActive, metric.WithUnit("{operation}"),
		metric.WithDescription("Model operations in flight across the scheduler's pairs."))
	if err != nil {
		return nil, err
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) (err error) {
		defer func() {
			if recover() != nil {
				t.failures.Add(1)
				err = errPanic
			}
		}()
		s := read()
		o.ObserveInt64(queued, int64(s.Queued))
		o.ObserveInt64(running, int64(s.Running))
		o.ObserveInt64(ops, int64(s.ModelOps))
		return nil
	}, queued, running, ops)
	if err != nil {
		return nil, err
	}
	return reg.Unregister, nil
}
