package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// SetupOptions says what Setup builds beside the environment.
type SetupOptions struct {
	// Getenv reads the selecting variables below; nil reads nothing. The
	// exporters read their own (endpoint, headers, timeout, TLS) from the
	// process environment, as the OpenTelemetry exporters document.
	Getenv func(string) string
	// ServiceVersion is the service.version resource attribute, if set.
	ServiceVersion string
	// Console receives OTLP JSON when OTEL_TRACES_EXPORTER is "console";
	// nil means such a setting is refused.
	Console io.Writer
	// Metrics builds a MeterProvider; a run prints none, a server does.
	Metrics bool
	// Prometheus adds a Prometheus reader (Providers.Prometheus), whatever
	// OTEL_METRICS_EXPORTER says; implies Metrics.
	Prometheus bool
}

// Providers are what Setup built. Shutdown flushes and stops them.
type Providers struct {
	Tracer     *sdktrace.TracerProvider // nil when traces are off
	Meter      *sdkmetric.MeterProvider // nil when metrics are off
	Prometheus *Prometheus              // with SetupOptions.Prometheus
}

// Config returns a Config drawing with these providers.
func (p *Providers) Config() Config {
	var c Config
	if p.Tracer != nil {
		c.TracerProvider = p.Tracer
	}
	if p.Meter != nil {
		c.MeterProvider = p.Meter
	}
	return c
}

// Shutdown flushes what is buffered and stops the exporters, within ctx.
func (p *Providers) Shutdown(ctx context.Context) error {
	var errs []error
	if p.Tracer != nil {
		errs = append(errs, p.Tracer.Shutdown(ctx))
	}
	if p.Meter != nil {
		errs = append(errs, p.Meter.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// ErrUnsupported is the cause of a Setup error for an exporter or
// protocol this package does not build.
var ErrUnsupported = errors.New("telemetry: unsupported exporter setting")

// Setup builds tracer and meter providers from the standard OpenTelemetry
// environment:
//
//   - OTEL_SDK_DISABLED=true: nothing at all;
//   - OTEL_TRACES_EXPORTER: otlp (default), console (OTLP JSON to
//     SetupOptions.Console) or none;
//   - OTEL_METRICS_EXPORTER: otlp (default), prometheus or none;
//   - OTEL_EXPORTER_OTLP_PROTOCOL, or the _TRACES_ and _METRICS_ ones:
//     http/protobuf (default) or grpc;
//   - OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (service.name
//     defaults to spice-orch);
//   - and whatever the OTLP exporters and the batch span processor read
//     themselves: OTEL_EXPORTER_OTLP_ENDPOINT, _HEADERS, _TIMEOUT, ...,
//     OTEL_BSP_*.
//
// Spans go through a batch processor, which drops rather than waits when
// its queue is full, and get IDGenerator's IDs. Nothing is exported until
// the first span ends. An export that fails is not logged: the first
// failure is kept and Providers.Shutdown returns it, so that an
// unreachable endpoint surfaces there, in the host's own words.
func Setup(ctx context.Context, o SetupOptions) (*Providers, error) {
	get := o.Getenv
	if get == nil {
		get = func(string) string { return "" }
	}
	p := &Providers{}
	if strings.EqualFold(strings.TrimSpace(get("OTEL_SDK_DISABLED")), "true") {
		return p, nil
	}
	attrs := []attribute.KeyValue{semconv.ServiceName("spice-orch")}
	if o.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(o.ServiceVersion))
	}
	// telemetry.sdk.* are Required of every resource.
	res, err := resource.New(ctx, resource.WithSchemaURL(semconv.SchemaURL), resource.WithTelemetrySDK(),
		resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, err
	}
	if err := p.setupTraces(ctx, o, get, res); err != nil {
		return nil, err
	}
	if err := p.setupMetrics(ctx, o, get, res); err != nil {
		_ = p.Shutdown(ctx)
		return nil, err
	}
	return p, nil
}

func (p *Providers) setupTraces(ctx context.Context, o SetupOptions, get func(string) string, res *resource.Resource) error {
	var exp sdktrace.SpanExporter
	switch v := setting(get, "OTEL_TRACES_EXPORTER", "otlp"); v {
	case "none":
		return nil
	case "console":
		if o.Console == nil {
			return unsupported("OTEL_TRACES_EXPORTER", v)
		}
		p.Tracer = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithIDGenerator(IDGenerator()),
			sdktrace.WithSyncer(NewJSONExporter(o.Console)))
		return nil
	case "otlp":
		var err error
		switch proto := protocol(get, "TRACES"); proto {
		case "http/protobuf":
			exp, err = otlptracehttp.New(ctx)
		case "grpc":
			exp, err = otlptracegrpc.New(ctx)
		default:
			return unsupported("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", proto)
		}
		if err != nil {
			return err
		}
	default:
		return unsupported("OTEL_TRACES_EXPORTER", v)
	}
	p.Tracer = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithIDGenerator(IDGenerator()),
		sdktrace.WithBatcher(&spanFailures{SpanExporter: exp}))
	return nil
}

func (p *Providers) setupMetrics(ctx context.Context, o SetupOptions, get func(string) string, res *resource.Resource) error {
	if !o.Metrics && !o.Prometheus {
		return nil
	}
	opts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	if o.Prometheus {
		prom, err := NewPrometheus()
		if err != nil {
			return err
		}
		p.Prometheus = prom
		opts = append(opts, sdkmetric.WithReader(prom.Reader))
	}
	switch v := setting(get, "OTEL_METRICS_EXPORTER", "otlp"); v {
	case "none":
	case "prometheus":
		if p.Prometheus == nil {
			prom, err := NewPrometheus()
			if err != nil {
				return err
			}
			p.Prometheus = prom
			opts = append(opts, sdkmetric.WithReader(prom.Reader))
		}
	case "otlp":
		var exp sdkmetric.Exporter
		var err error
		switch proto := protocol(get, "METRICS"); proto {
		case "http/protobuf":
			exp, err = otlpmetrichttp.New(ctx)
		case "grpc":
			exp, err = otlpmetricgrpc.New(ctx)
		default:
			return unsupported("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", proto)
		}
		if err != nil {
			return err
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(&metricFailures{Exporter: exp})))
	default:
		return unsupported("OTEL_METRICS_EXPORTER", v)
	}
	if len(opts) > 1 {
		p.Meter = sdkmetric.NewMeterProvider(opts...)
	}
	return nil
}

// setting reads a variable that names one exporter, or its default. A
// list ("otlp,console") takes its first entry.
func setting(get func(string) string, name, def string) string {
	v := strings.ToLower(strings.TrimSpace(get(name)))
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	if v == "" {
		return def
	}
	return v
}

// protocol reads the OTLP protocol of a signal ("TRACES", "METRICS").
func protocol(get func(string) string, signal string) string {
	if v := strings.TrimSpace(get("OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL")); v != "" {
		return strings.ToLower(v)
	}
	return setting(get, "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
}

func unsupported(name, value string) error {
	return errors.Join(ErrUnsupported, bound.Malformedf(strings.ToLower(name), "must be one of the values it documents, not "+quoteName(value)))
}

// quoteName quotes a setting's value when it is a plain name, and says
// nothing of it otherwise: the environment is outside input.
func quoteName(v string) string {
	if bound.Name("v", v) != nil || len(v) > 32 {
		return "this value"
	}
	return `"` + v + `"`
}

// failures keeps the first export error of an exporter and counts the
// failed exports. The SDK's processors hand an export's error only to the
// global error handler, a log line of its own; an exporter wrapped in it
// reports success to them instead, and its Shutdown returns what failed.
type failures struct {
	mu    sync.Mutex
	first error
	n     int
}

func (f *failures) note(err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first == nil {
		f.first = err
	}
	f.n++
}

// err returns the failures so far, nil when there were none.
func (f *failures) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first == nil {
		return nil
	}
	return fmt.Errorf("%d exports failed, the first: %w", f.n, f.first)
}

type spanFailures struct {
	sdktrace.SpanExporter
	failures
}

func (x *spanFailures) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	x.note(x.SpanExporter.ExportSpans(ctx, spans))
	return nil
}

func (x *spanFailures) Shutdown(ctx context.Context) error {
	return errors.Join(x.SpanExporter.Shutdown(ctx), x.err())
}

type metricFailures struct {
	sdkmetric.Exporter
	failures
}

func (x *metricFailures) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	x.note(x.Exporter.Export(ctx, rm))
	return nil
}

func (x *metricFailures) Shutdown(ctx context.Context) error {
	return errors.Join(x.Exporter.Shutdown(ctx), x.err())
}
