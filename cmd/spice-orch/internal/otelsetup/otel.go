package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/telemetry"
)

// Env is what the setup reads of the process.
type Env struct {
	Getenv  func(string) string
	Stderr  io.Writer // the console exporter's output
	Version string    // the service.version resource attribute
}

// UsageError is a setting or flag telemetry does not understand: bad
// usage, said before anything runs.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// oneLine is the first line of s, shown as render.Field shows a value.
func oneLine(s string) string {
	if first, _, more := strings.Cut(s, "\n"); more {
		return render.Field(first) + " ..."
	}
	return render.Field(s)
}

// ShutdownTimeout bounds the flush of buffered spans and metrics when
// a command ends: an unreachable collector costs at most this long.
const ShutdownTimeout = 10 * time.Second

// ProviderNames gives each worker role of s its gen_ai.provider.name.
func ProviderNames(s spec.Spec) map[string]string {
	out := make(map[string]string, len(s.Workers))
	for _, w := range s.Workers {
		out[w.Role] = providerName(w.Provider)
	}
	return out
}

func providerName(p spec.Provider) string {
	if p == spec.Scripted {
		return "spice_orch.scripted"
	}
	return string(p) // "openai" is the semantic conventions' own name
}

// Session is telemetry for one command: the providers built from the
// environment and the Telemetry drawing with them.
type Session struct {
	Providers *telemetry.Providers
	Telemetry *telemetry.Telemetry
}

// Setup builds the providers from the environment, for every command
// with --otel. Telemetry can never fail a pair, but a setting it does not
// understand is a usage error, said before anything runs.
func Setup(ctx context.Context, env Env, o telemetry.SetupOptions) (*telemetry.Providers, error) {
	o.Getenv, o.ServiceVersion, o.Console = env.Getenv, env.Version, env.Stderr
	ps, err := telemetry.Setup(ctx, o)
	if err != nil {
		if errors.Is(err, telemetry.ErrUnsupported) {
			return nil, &UsageError{Err: err}
		}
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	return ps, nil
}

// newTelemetry draws with ps, naming each worker role's provider.
func newTelemetry(ps *telemetry.Providers, providers map[string]string) (*telemetry.Telemetry, error) {
	cfg := ps.Config()
	cfg.Providers = providers
	tel, err := telemetry.New(cfg)
	if err != nil {
		return nil, &UsageError{Err: err}
	}
	return tel, nil
}

// Start builds telemetry from the environment for a command that
// draws one pair (run, export-trace).
func Start(ctx context.Context, env Env, metrics bool, providers map[string]string) (*Session, error) {
	ps, err := Setup(ctx, env, telemetry.SetupOptions{Metrics: metrics})
	if err != nil {
		return nil, err
	}
	tel, err := newTelemetry(ps, providers)
	if err != nil {
		_ = ps.Shutdown(ctx)
		return nil, err
	}
	return &Session{Providers: ps, Telemetry: tel}, nil
}

// Observe adds the session to a pair's timeline as a best-effort
// observer, and lets it read what the workers' providers say of
// themselves: it never blocks or fails the pair.
func (o *Session) Observe(cfg *orchestrator.Config) { o.Telemetry.Instrument(cfg) }

// WriteRecord writes the pair's trace record (its workers' provider names
// and the span it continues, if any) to the store beside its timeline, for
// 'runs export-trace' to draw the trace it drew live. A store that refuses
// it is said on stderr; the pair runs all the same.
func WriteRecord(ctx context.Context, stderr io.Writer, st eventlog.Observer, cfg *orchestrator.Config, parent trace.SpanContext) {
	if st == nil {
		return
	}
	rec := telemetry.Record{PairID: cfg.ID, Providers: telemetry.ProviderNames(cfg), Parent: parent}
	if err := telemetry.WriteRecord(ctx, st, rec, time.Now()); err != nil {
		fmt.Fprintf(stderr, "spice-orch: the store refused the pair's trace record: %s\n", oneLine(err.Error()))
	}
}

// Shutdown flushes what is buffered, within ShutdownTimeout, and says
// on stderr what could not be sent or drawn: telemetry never changes a
// command's exit code.
func (o *Session) Shutdown(stderr io.Writer) {
	st := o.Telemetry.Stats()
	shutdownOTel(stderr, o.Providers, st.Lost+st.Failures)
}

// shutdownOTel flushes and stops ps within ShutdownTimeout, and says
// on stderr what could not be sent, and how many timeline events could
// not be drawn.
func shutdownOTel(stderr io.Writer, ps *telemetry.Providers, undrawn uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := ps.Shutdown(ctx); err != nil {
		fmt.Fprintf(stderr, "spice-orch: telemetry: not all of it was sent: %s\n", oneLine(err.Error()))
	}
	if undrawn > 0 {
		fmt.Fprintf(stderr, "spice-orch: telemetry: %d timeline events could not be drawn\n", undrawn)
	}
}

// ParseProviders reads --provider ROLE=NAME flags.
func ParseProviders(flags []string) (map[string]string, error) {
	out := make(map[string]string, len(flags))
	for _, f := range flags {
		role, name, ok := strings.Cut(f, "=")
		if !ok || role == "" || name == "" {
			return nil, &UsageError{Err: errors.New("--provider takes ROLE=NAME, for example writer=openai")}
		}
		out[role] = name
	}
	return out, nil
}

// schedulerStats adapts a scheduler to the telemetry gauges, for a
// command that runs one (serve): tel.ObserveScheduler(schedulerStats(s)).
func schedulerStats(s *scheduler.Scheduler) func() telemetry.SchedulerStats {
	return func() telemetry.SchedulerStats {
		st := s.Stats()
		return telemetry.SchedulerStats{Queued: st.Queued, Running: st.Running, ModelOps: st.ModelOps}
	}
}
