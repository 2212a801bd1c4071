package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/otelsetup"
	"github.com/spice-orch/spice-orch/store"
	"github.com/spice-orch/spice-orch/telemetry"
)

func newExportTraceCmd(env Env, f *runsFlags) *cobra.Command {
	var out string
	var providers []string
	cmd := &cobra.Command{
		Use:   "export-trace ID",
		Short: "Export a recorded pair as an OpenTelemetry trace (OTLP, or an OTLP JSON file)",
		Long: `Export a recorded pair as the trace 'run --otel' drew for it live: the
same spans, times, attributes and IDs, since a pair's trace is drawn from
its timeline alone and its span IDs derive from the pair and run IDs.

Without --out, the trace goes where 'run --otel' sends one, as the standard
OpenTelemetry environment says:

  OTEL_EXPORTER_OTLP_ENDPOINT   the collector (default http://localhost:4318;
                                for grpc, http://localhost:4317)
  OTEL_EXPORTER_OTLP_PROTOCOL   http/protobuf (default) or grpc
  OTEL_TRACES_EXPORTER          otlp (default), console (OTLP JSON on
                                stderr) or none
  OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS,
  ..._TIMEOUT, ..._CERTIFICATE and the _TRACES_ variants, OTEL_SDK_DISABLED

With --out FILE, the trace is written to FILE as one line of OTLP JSON.

Beside the pair, the store holds its trace record: the provider each
worker used (gen_ai.provider.name) and, for a pair 'serve --otel' ran for a
request with a traceparent, the span it continued; the export is drawn in
that same trace, below that span. --provider ROLE=NAME overrides a role's
provider name, for a pair recorded before the store kept them.

What each response said of itself (gen_ai.response.*), the server's
address and the tool descriptions are not recorded: only the live trace
has them.`,
		Example: `  spice-orch runs export-trace pair-20261130-015500-1a2b3c4d
  spice-orch runs export-trace pair-20261130-015500-1a2b3c4d --provider writer=openai
  spice-orch runs export-trace pair-20261130-015500-1a2b3c4d --out trace.json
  OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 spice-orch runs export-trace pair-...`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: f.completeIDs(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := otelsetup.ParseProviders(providers)
			if err != nil {
				return otelErr(err)
			}
			st, _, ok, err := f.open(cmd.Context(), env)
			if err != nil {
				return err
			}
			if !ok {
				return failed(fmt.Errorf("%s: not found (nothing recorded yet)", args[0]))
			}
			defer st.Close()
			return exportTrace(cmd.Context(), env, st, args[0], out, names)
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "write the trace to this file as OTLP JSON instead of sending it")
	cmd.Flags().StringArrayVar(&providers, "provider", nil, "ROLE=NAME: the gen_ai.provider.name of a worker role (repeatable)")
	return cmd
}

func exportTrace(ctx context.Context, env Env, st *store.Store, pairID, out string, providers map[string]string) error {
	if _, err := st.Pair(ctx, pairID); err != nil {
		return notFoundOr(pairID, err)
	}
	var lines bytes.Buffer
	if err := st.ReplayJSON(ctx, &lines, pairID); err != nil {
		return notFoundOr(pairID, err)
	}
	rec, err := readRecord(ctx, st, pairID)
	if err != nil {
		return err
	}
	for role, name := range providers {
		if rec.Providers == nil {
			rec.Providers = make(map[string]string, len(providers))
		}
		rec.Providers[role] = name
	}
	if out != "" {
		return otelErr(otelsetup.WriteTraceFile(ctx, otelEnv(env), &lines, out, rec))
	}
	o, err := otelsetup.Start(ctx, otelEnv(env), false, rec.Providers)
	if err != nil {
		return otelErr(err)
	}
	o.Telemetry.ContinueRecord(ctx, rec)
	if o.Providers.Tracer == nil {
		o.Shutdown(env.Stderr)
		return usageErr(errors.New("traces are off (OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none): nothing to export"))
	}
	rerr := o.Telemetry.ReplayJSON(ctx, &lines)
	ctxS, cancel := context.WithTimeout(context.Background(), otelsetup.ShutdownTimeout)
	defer cancel()
	serr := o.Providers.Shutdown(ctxS)
	switch {
	case rerr != nil:
		return failed(rerr)
	case serr != nil:
		return failed(fmt.Errorf("sending the trace: %w", serr))
	}
	return nil
}

// readRecord reads the pair's trace record; a pair recorded without one
// has the zero Record.
func readRecord(ctx context.Context, st *store.Store, pairID string) (telemetry.Record, error) {
	var b bytes.Buffer
	switch err := st.ReplayJSON(ctx, &b, telemetry.RecordLog(pairID)); {
	case errors.Is(err, store.ErrNotFound):
		return telemetry.Record{PairID: pairID}, nil
	case err != nil:
		return telemetry.Record{}, failed(err)
	}
	rec, err := telemetry.ReadRecord(&b)
	if err != nil {
		return telemetry.Record{}, failed(fmt.Errorf("the pair's trace record: %w", err))
	}
	return rec, nil
}
