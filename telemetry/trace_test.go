package telemetry_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/telemetry"
)

// TestD3_TheBuiltinReviewPairIsOneTrace draws the CLI's built-in review
// pair (two rounds: rejected, then approved) and checks the exact span
// tree, the GenAI attributes of each kind of span, the handoffs as events
// and links, and that every span is in the pair's one trace.
func TestD3_TheBuiltinReviewPairIsOneTrace(t *testing.T) {
	tr := newTracing(t)
	// No Config.Providers: the providers name themselves.
	tel := tr.telemetry(t, telemetry.Config{})
	cfg := builtinPair(t, nil)
	tel.Instrument(&cfg)
	_, res, err := play(t, context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonApproved, res.Reason)
	spans := tr.exp.GetSpans()
	writer := `  invoke_agent writer
    chat scripted-1 [client]
    execute_tool fs.write
    chat scripted-1 [client]
`
	reviewer := `  invoke_agent reviewer
    chat scripted-1 [client]
    execute_tool fs.read
    execute_tool text.stats
    chat scripted-1 [client]
`
	require.Equal(t, "invoke_workflow review_loop\n"+writer+reviewer+writer+reviewer, tree(spans))
	require.Len(t, spans, 19)
	for _, s := range spans {
		require.Equal(t, spans[0].SpanContext.TraceID(), s.SpanContext.TraceID(), s.Name)
		require.False(t, s.EndTime.Before(s.StartTime), s.Name)
	}

	root := named(spans, "invoke_workflow review_loop")[0]
	require.False(t, root.Parent.IsValid())
	require.Equal(t, []string{
		"gen_ai.operation.name=invoke_workflow", "gen_ai.conversation.id=pair-1", "gen_ai.workflow.name=review_loop",
		"spice_orch.plan.id=plan-1", "spice_orch.pair.reason=approved", "spice_orch.pair.rounds=2",
		"spice_orch.pair.runs=4", "gen_ai.usage.input_tokens=", "gen_ai.usage.output_tokens=",
		"spice_orch.pair.input_tokens=1860", "spice_orch.pair.output_tokens=640",
		"spice_orch.pair.tool_calls=6", "error.type=",
	}, attrs(root, "gen_ai.operation.name", "gen_ai.conversation.id", "gen_ai.workflow.name",
		"spice_orch.plan.id", "spice_orch.pair.reason", "spice_orch.pair.rounds", "spice_orch.pair.runs",
		"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "spice_orch.pair.input_tokens",
		"spice_orch.pair.output_tokens", "spice_orch.pair.tool_calls", "error.type"))
	// Summed over every span, the tokens are counted twice (the runs and
	// their chat operations), never a third time by the pair.
	var sum int64
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if kv.Key == "gen_ai.usage.input_tokens" {
				sum += kv.Value.AsInt64()
			}
		}
	}
	require.Equal(t, int64(2*1860), sum)
	require.Equal(t, codes.Unset, root.Status.Code)

	agents := append(named(spans, "invoke_agent writer"), named(spans, "invoke_agent reviewer")...)
	require.Len(t, agents, 4)
	first := named(spans, "invoke_agent writer")[0]
	require.Equal(t, root.SpanContext.SpanID(), first.Parent.SpanID())
	require.Equal(t, []string{
		"gen_ai.operation.name=invoke_agent", "gen_ai.agent.name=writer", "gen_ai.agent.id=pair-1/writer",
		"spice_orch.run.id=pair-1/writer/run-1",
		"gen_ai.conversation.id=pair-1", "gen_ai.provider.name=spice_orch.scripted", "gen_ai.request.model=scripted-1",
		"gen_ai.usage.input_tokens=340", "gen_ai.usage.output_tokens=170", "spice_orch.run.turns=2",
	}, attrs(first, "gen_ai.operation.name", "gen_ai.agent.name", "gen_ai.agent.id", "spice_orch.run.id",
		"gen_ai.conversation.id", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.usage.input_tokens",
		"gen_ai.usage.output_tokens", "spice_orch.run.turns"))
	// The writer's second run is the same agent.
	require.Equal(t, "pair-1/writer", attr(named(spans, "invoke_agent writer")[1], "gen_ai.agent.id"))
	require.Equal(t, "pair-1/writer/run-2", attr(named(spans, "invoke_agent writer")[1], "spice_orch.run.id"))

	chat := named(spans, "chat scripted-1")[0]
	require.Equal(t, trace.SpanKindClient, chat.SpanKind)
	require.Equal(t, first.SpanContext.SpanID(), chat.Parent.SpanID())
	require.Equal(t, []string{
		"gen_ai.operation.name=chat", "gen_ai.provider.name=spice_orch.scripted", "gen_ai.request.model=scripted-1",
		"gen_ai.conversation.id=pair-1", "gen_ai.request.stream=true",
		"gen_ai.usage.input_tokens=120", "gen_ai.usage.output_tokens=80",
	}, attrs(chat, "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
		"gen_ai.conversation.id", "gen_ai.request.stream",
		"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"))

	write := named(spans, "execute_tool fs.write")[0]
	require.Equal(t, first.SpanContext.SpanID(), write.Parent.SpanID())
	require.Equal(t, []string{
		"gen_ai.operation.name=execute_tool", "gen_ai.tool.name=fs.write", "gen_ai.tool.call.id=pair-1/writer/op-1-c1",
		"gen_ai.tool.type=function", "gen_ai.conversation.id=pair-1", "spice_orch.tool.effect=mutating",
		"spice_orch.tool.outcome=ok", "gen_ai.tool.call.result=",
	}, attrs(write, "gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.type",
		"gen_ai.conversation.id", "spice_orch.tool.effect", "spice_orch.tool.outcome", "gen_ai.tool.call.result"))
	require.NotEmpty(t, attr(write, "gen_ai.tool.description"))

	// Three handoffs: events of the pair span, and links from each
	// receiving run to the run the answer came from.
	require.Len(t, root.Events, 3)
	var handoffs []string
	for _, e := range root.Events {
		require.Equal(t, "handoff", e.Name)
		handoffs = append(handoffs, eventAttr(e.Attributes, "spice_orch.handoff.from")+"->"+
			eventAttr(e.Attributes, "spice_orch.handoff.to")+" "+eventAttr(e.Attributes, "spice_orch.handoff.bytes"))
		require.Len(t, eventAttr(e.Attributes, "spice_orch.handoff.sha256"), 64)
	}
	require.Equal(t, []string{"writer->reviewer 254", "reviewer->writer 215", "writer->reviewer 582"}, handoffs)
	require.Empty(t, agents[0].Links)
	reviewer1 := named(spans, "invoke_agent reviewer")[0]
	require.Len(t, reviewer1.Links, 1)
	require.Equal(t, first.SpanContext.SpanID(), reviewer1.Links[0].SpanContext.SpanID())
	require.Equal(t, "254", eventAttr(reviewer1.Links[0].Attributes, "spice_orch.handoff.bytes"))
	writer2 := named(spans, "invoke_agent writer")[1]
	require.Equal(t, reviewer1.SpanContext.SpanID(), writer2.Links[0].SpanContext.SpanID())
}

// TestD3_ContentIsRecordedOnlyWhenAskedFor checks that tool results and
// final answers reach spans only with RecordContent.
func TestD3_ContentIsRecordedOnlyWhenAskedFor(t *testing.T) {
	tr := newTracing(t)
	cfg := telemetryConfig()
	cfg.RecordContent = true
	_, _, err := play(t, context.Background(), builtinPair(t, tr.telemetry(t, cfg)))
	require.NoError(t, err)
	spans := tr.exp.GetSpans()
	require.Contains(t, attr(named(spans, "execute_tool fs.write")[0], "gen_ai.tool.call.result"), "draft.md")
	require.Contains(t, attr(named(spans, "invoke_agent reviewer")[1], "spice_orch.run.final_text"), "APPROVED")
}

// TestD3_ACancelledPair cancels the built-in pair at its first tool call:
// the tool, its run and the pair end cancelled, with error status and
// error.type, and nothing after the cancellation is drawn.
func TestD3_ACancelledPair(t *testing.T) {
	tr := newTracing(t)
	cfg := builtinPair(t, tr.telemetry(t, telemetryConfig()))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.Timeline.Required = []eventlog.Observer{cancelAt(event.KindToolStarted, cancel)}
	_, res, err := play(t, ctx, cfg)
	require.ErrorIs(t, err, orchestrator.ErrCancelled)
	require.Equal(t, orchestrator.ReasonCancelled, res.Reason)
	spans := tr.exp.GetSpans()
	require.Equal(t, `invoke_workflow review_loop ERROR cancelled
  invoke_agent writer ERROR cancelled
    chat scripted-1 [client]
    execute_tool fs.write ERROR cancelled
`, tree(spans))
	root := named(spans, "invoke_workflow review_loop")[0]
	require.Equal(t, "cancelled", attr(root, "spice_orch.pair.reason"))
	require.Equal(t, codes.Error, root.Status.Code)
	tool := named(spans, "execute_tool fs.write")[0]
	require.Equal(t, codes.Error, tool.Status.Code)
	require.NotEmpty(t, attr(tool, "spice_orch.tool.outcome"))
}

// TestD3_AFailedToolCall draws a relay whose writer's tool fails with a
// definitive execution error, which fails the run and the pair: the tool,
// the run and the pair carry error status, the problem code as
// error.type, and the tool its outcome and retry advice.
func TestD3_AFailedToolCall(t *testing.T) {
	tr := newTracing(t)
	_, res, err := play(t, context.Background(), failingToolPair(t, tr.telemetry(t, telemetryConfig())))
	require.ErrorIs(t, err, orchestrator.ErrWorkerFailed)
	require.Equal(t, orchestrator.ReasonWorkerFailed, res.Reason)
	spans := tr.exp.GetSpans()
	require.Equal(t, `invoke_workflow relay ERROR worker_failed
  invoke_agent writer ERROR disk_full
    chat scripted-1 [client]
    execute_tool disk.write ERROR disk_full
`, tree(spans))
	call := named(spans, "execute_tool disk.write")[0]
	require.Equal(t, []string{
		"gen_ai.tool.name=disk.write", "gen_ai.tool.call.id=c1", "spice_orch.tool.effect=mutating",
		"spice_orch.tool.replay=idempotent", "spice_orch.tool.outcome=definitive", "spice_orch.tool.retry=no_retry",
		"error.type=disk_full",
	}, attrs(call, "gen_ai.tool.name", "gen_ai.tool.call.id", "spice_orch.tool.effect", "spice_orch.tool.replay",
		"spice_orch.tool.outcome", "spice_orch.tool.retry", "error.type"))
	// The problem's message is content: without RecordContent the status
	// says only the error type.
	require.Equal(t, sdktrace.Status{Code: codes.Error, Description: "disk_full"}, call.Status)
	require.Equal(t, sdktrace.Status{Code: codes.Error, Description: "disk_full"}, named(spans, "invoke_agent writer")[0].Status)
	root := named(spans, "invoke_workflow relay")[0]
	require.Equal(t, []string{"spice_orch.pair.reason=worker_failed", "spice_orch.pair.failed_worker=writer", "error.type=worker_failed"},
		attrs(root, "spice_orch.pair.reason", "spice_orch.pair.failed_worker", "error.type"))
}

// cancelAt is a required timeline observer that cancels the pair's
// context on the first event of kind.
func cancelAt(kind string, cancel context.CancelFunc) eventlog.Observer {
	return eventlog.ObserverFunc(func(_ context.Context, e eventlog.Event) error {
		if e.Kind() == kind {
			cancel()
		}
		return nil
	})
}

// failingToolPair is a relay whose writer calls a tool that fails with a
// definitive execution error, then answers; the reviewer answers.
func failingToolPair(t testing.TB, tel eventlog.Observer) orchestrator.Config {
	t.Helper()
	def, err := tool.NewDefinition(tool.DefinitionConfig{Name: "disk.write", Description: "Writes to a disk.",
		Effect: tool.Mutating, Replay: tool.Idempotent})
	require.NoError(t, err)
	failing := enginetest.Tool{Def: def, Fn: func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		ee, err := tool.NewExecutionError(tool.ExecutionErrorConfig{CallID: call.ID(), Outcome: tool.Definitive,
			Retry: tool.NoRetry, Problem: problem.Must("disk_full", "the disk is full")})
		if err != nil {
			return tool.Result{}, err
		}
		return tool.Result{}, ee
	}}
	first := [][]model.Item{
		{enginetest.Call("c1", "disk.write", `{}`), enginetest.Done(12, 3)},
		enginetest.Answer("The disk is full; nothing was written."),
	}
	second := [][]model.Item{enginetest.Answer("Noted.")}
	return scriptedPair(t, tel, orchestrator.Relay, first, second, failing)
}

func eventAttr(kvs []attribute.KeyValue, key string) string {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}
