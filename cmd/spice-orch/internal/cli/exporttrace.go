package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

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

The store does not record which provider each worker used: give
--provider ROLE=NAME for each (as 'run' knew them from the spec:
spice_orch.scripted for scripted workers, openai for OpenAI ones) to get
the gen_ai.provider.name attributes of the live trace.`,
		Example: `  spice-orch runs export-trace pair-20261130-015500-1a2b3c4d \
      --provider writer=spice_orch.scripted --provider reviewer=spice_orch.scripted
  spice-orch runs export-trace pair-20261130-015500-1a2b3c4d --out trace.json
  OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 spice-orch runs export-trace pair-...`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: f.completeIDs(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := parseProviders(providers)
			if err != nil {
				return err
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
	if out != "" {
		return exportTraceFile(ctx, &lines, out, providers)
	}
	o, err := startOTel(ctx, env, false, providers)
	if err != nil {
		return err
	}
	if o.providers.Tracer == nil {
		o.shutdown(env.Stderr)
		return usageErr(errors.New("traces are off (OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none): nothing to export"))
	}
	rerr := o.tel.ReplayJSON(ctx, &lines)
	ctxS, cancel := context.WithTimeout(context.Background(), otelShutdownTimeout)
	defer cancel()
	serr := o.providers.Shutdown(ctxS)
	switch {
	case rerr != nil:
		return failed(rerr)
	case serr != nil:
		return failed(fmt.Errorf("sending the trace: %w", serr))
	}
	return nil
}

// exportTraceFile writes the trace as OTLP JSON, replacing path only once
// the whole trace is written.
func exportTraceFile(ctx context.Context, lines *bytes.Buffer, path string, providers map[string]string) error {
	var buf bytes.Buffer
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(telemetry.NewJSONExporter(&buf)),
		sdktrace.WithIDGenerator(telemetry.IDGenerator()))
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp, Providers: providers})
	if err != nil {
		return usageErr(err)
	}
	rerr := tel.ReplayJSON(ctx, lines)
	if err := tp.Shutdown(context.Background()); err != nil {
		return failed(err)
	}
	if rerr != nil {
		return failed(rerr)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		return failed(err)
	}
	return nil
}
