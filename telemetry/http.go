package telemetry

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"
)

// Extract returns ctx carrying the remote span context of the W3C
// traceparent (and tracestate) headers in h. Without a valid traceparent
// it returns ctx unchanged.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(h))
}

// ContinueRequest makes the pair pairID continue the trace of an HTTP
// request's traceparent header: a serve handler for POST /v1/pairs calls
// it with the request and the new pair's ID before it submits the pair.
// It reports whether the request carried a valid traceparent.
func (t *Telemetry) ContinueRequest(r *http.Request, pairID string) bool {
	ctx := Extract(r.Context(), r.Header)
	t.Continue(ctx, pairID)
	return hasRemote(ctx)
}

func hasRemote(ctx context.Context) bool {
	sc := trace.SpanContextFromContext(ctx)
	return sc.IsValid() && sc.IsRemote()
}

// Prometheus is a metric reader whose metrics an http.Handler serves in
// the Prometheus text format, from a registry of its own (never the
// process-wide default one).
type Prometheus struct {
	// Reader goes to sdkmetric.WithReader of the MeterProvider whose
	// metrics /metrics shows.
	Reader sdkmetric.Reader
	// Handler serves GET /metrics.
	Handler http.Handler
}

// NewPrometheus returns a reader and its handler. A serve command mounts
// the handler at /metrics:
//
//	prom, _ := telemetry.NewPrometheus()
//	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(prom.Reader))
//	tel, _ := telemetry.New(telemetry.Config{MeterProvider: mp})
//	mux.Handle("GET /metrics", prom.Handler)
func NewPrometheus() (*Prometheus, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		// A scrape that fails is answered with an error, never a panic;
		// and a slow one never holds more than a bounded number of
		// concurrent scrapes.
		ErrorHandling:       promhttp.HTTPErrorOnError,
		MaxRequestsInFlight: 4,
	})
	return &Prometheus{Reader: exp, Handler: h}, nil
}
