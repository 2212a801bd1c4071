package cli

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/telemetry"
)

// serveOTelHelp is serve's --otel flag help.
const serveOTelHelp = "send a trace of every pair (and metrics) to OpenTelemetry, configured by the OTEL_* environment as for 'run --otel', " +
	"continue a POST /v1/pairs request's traceparent, and serve Prometheus metrics at /metrics"

// serveOTel is serve's telemetry: the providers built from the
// environment as for 'run --otel', with a Prometheus reader for /metrics,
// and the scheduler gauges. Each pair is drawn by a Telemetry of its own,
// so its spans name the providers its own spec chose; they share the
// providers, so their metrics add up.
type serveOTel struct {
	providers  *telemetry.Providers
	gauges     *telemetry.Telemetry
	unregister func() error
	undrawn    atomic.Uint64 // events the ended pairs' Telemetry could not draw
}

// setupFunc builds the providers; tests replace telemetry.Setup's
// exporters with in-memory ones.
type setupFunc func(ctx context.Context, env Env, o telemetry.SetupOptions) (*telemetry.Providers, error)

// startServeOTel builds serve's telemetry. A bad OTEL_* setting is a usage
// error before the server listens.
func startServeOTel(ctx context.Context, env Env, setup setupFunc) (*serveOTel, error) {
	if setup == nil {
		setup = setupOTel
	}
	ps, err := setup(ctx, env, telemetry.SetupOptions{Metrics: true, Prometheus: true})
	if err != nil {
		return nil, err
	}
	gauges, err := newTelemetry(ps, nil)
	if err != nil {
		_ = ps.Shutdown(ctx)
		return nil, err
	}
	return &serveOTel{providers: ps, gauges: gauges, unregister: func() error { return nil }}, nil
}

// observeScheduler registers the scheduler gauges, read at each scrape.
func (o *serveOTel) observeScheduler(s *scheduler.Scheduler) error {
	un, err := o.gauges.ObserveScheduler(schedulerStats(s))
	if err != nil {
		return err
	}
	o.unregister = un
	return nil
}

// metrics is the /metrics handler, nil when metrics are off
// (OTEL_SDK_DISABLED=true).
func (o *serveOTel) metrics() http.Handler {
	if o == nil || o.providers.Prometheus == nil {
		return nil
	}
	return o.providers.Prometheus.Handler
}

// submitContext is server.Config.SubmitContext: the context a pair is
// built under carries the remote span of the request's traceparent, for
// the pair to continue: telemetry.ContinueRequest in the two halves the
// server hands out, the request here and the new pair's ID at build
// (serveOTel.pair), both before the pair is submitted.
func (o *serveOTel) submitContext(ctx context.Context, r *http.Request) context.Context {
	return telemetry.Extract(ctx, r.Header)
}

// pair attaches a Telemetry for one pair, before it is submitted, as a
// best-effort observer of its timeline, continuing the trace in ctx if
// there is one. done, called once the pair has ended (its timeline closed
// and drained), counts what it could not draw.
func (o *serveOTel) pair(ctx context.Context, cfg *orchestrator.Config, providers map[string]string) (done func(), err error) {
	tel, err := newTelemetry(o.providers, providers)
	if err != nil {
		return nil, err
	}
	tel.Continue(ctx, cfg.ID)
	tel.Instrument(cfg)
	return func() {
		st := tel.Stats()
		o.undrawn.Add(st.Lost + st.Failures)
	}, nil
}

// shutdown unregisters the gauges and flushes, within
// otelShutdownTimeout; what could not be sent is said on stderr.
func (o *serveOTel) shutdown(stderr io.Writer) {
	_ = o.unregister()
	shutdownOTel(stderr, o.providers, o.undrawn.Load()+o.gauges.Stats().Failures)
}
