package otelsetup

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/telemetry"
)

// Serve is serve's telemetry: the providers built from the
// environment as for 'run --otel', with a Prometheus reader for /metrics,
// and the scheduler gauges. Each pair is drawn by a Telemetry of its own,
// so its spans name the providers its own spec chose; they share the
// providers, so their metrics add up.
type Serve struct {
	providers  *telemetry.Providers
	gauges     *telemetry.Telemetry
	unregister func() error
	undrawn    atomic.Uint64 // events the ended pairs' Telemetry could not draw
}

// SetupFunc builds the providers; tests replace telemetry.Setup's
// exporters with in-memory ones.
type SetupFunc func(ctx context.Context, env Env, o telemetry.SetupOptions) (*telemetry.Providers, error)

// StartServe builds serve's telemetry. A bad OTEL_* setting is a usage
// error before the server listens.
func StartServe(ctx context.Context, env Env, setup SetupFunc) (*Serve, error) {
	if setup == nil {
		setup = Setup
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
	return &Serve{providers: ps, gauges: gauges, unregister: func() error { return nil }}, nil
}

// ObserveScheduler registers the scheduler gauges, read at each scrape.
func (o *Serve) ObserveScheduler(s *scheduler.Scheduler) error {
	un, err := o.gauges.ObserveScheduler(schedulerStats(s))
	if err != nil {
		return err
	}
	o.unregister = un
	return nil
}

// Metrics is the /metrics handler, nil when metrics are off
// (OTEL_SDK_DISABLED=true).
func (o *Serve) Metrics() http.Handler {
	if o == nil || o.providers.Prometheus == nil {
		return nil
	}
	return o.providers.Prometheus.Handler
}

// SubmitContext is server.Config.SubmitContext: the context a pair is
// built under carries the remote span of the request's traceparent, for
// the pair to continue: telemetry.ContinueRequest in the two halves the
// server hands out, the request here and the new pair's ID at build
// (Serve.Pair), both before the pair is submitted.
func (o *Serve) SubmitContext(ctx context.Context, r *http.Request) context.Context {
	return telemetry.Extract(ctx, r.Header)
}

// Pair attaches a Telemetry for one pair, before it is submitted, as a
// best-effort observer of its timeline, continuing the trace in ctx if
// there is one. done, called once the pair has ended (its timeline closed
// and drained), counts what it could not draw.
func (o *Serve) Pair(ctx context.Context, cfg *orchestrator.Config, providers map[string]string) (done func(), err error) {
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

// Shutdown unregisters the gauges and flushes, within
// ShutdownTimeout; what could not be sent is said on stderr.
func (o *Serve) Shutdown(stderr io.Writer) {
	_ = o.unregister()
	shutdownOTel(stderr, o.providers, o.undrawn.Load()+o.gauges.Stats().Failures)
}
