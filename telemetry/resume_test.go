package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/orchestrator"
)

var errKilled = errors.New("killed")

// recorder is a pair's store: it records the timeline until the relayed
// event of kind from worker, and refuses it and everything after, as a
// store whose process was killed there would have it.
type recorder struct {
	worker, kind string

	mu    sync.Mutex
	cut   bool
	evs   []orchestrator.RecordedEvent
	lines []string
}

func (r *recorder) Observe(_ context.Context, e eventlog.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rl, ok := e.Payload().(orchestrator.Relayed); r.cut || ok && rl.Worker() == r.worker && e.Kind() == r.kind {
		r.cut = true
		return errKilled
	}
	line := e.AppendJSON(nil)
	var env struct {
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		return err
	}
	r.evs = append(r.evs, orchestrator.RecordedEvent{Seq: e.Seq(), Kind: e.Kind(), Payload: env.Payload})
	r.lines = append(r.lines, string(line)+"\n")
	return nil
}

// TestD3_AResumedPairIsATraceLinkedToTheFirst: a pair cut off in its
// reviewer's run and resumed draws the resumed part live as a trace of
// its own, whose pair span links to the pair span of the first trace; the
// restarted run and its model operation are spans in it. Replayed from
// its whole record, the pair is one trace in which the cut-off run ends
// as interrupted and the pair span notes the resume.
func TestD3_AResumedPairIsATraceLinkedToTheFirst(t *testing.T) {
	tr := newTracing(t)
	ctx := context.Background()
	pair := func(rec *recorder, tel interface{ Instrument(*orchestrator.Config) }) orchestrator.Config {
		cfg := scriptedPair(t, nil, orchestrator.Relay, [][]model.Item{enginetest.Answer("the draft")}, [][]model.Item{enginetest.Answer("fine")})
		cfg.Timeline = orchestrator.TimelineConfig{Required: []eventlog.Observer{rec}, Journal: true}
		tel.Instrument(&cfg)
		return cfg
	}
	first := &recorder{worker: "reviewer", kind: "model.completed"}
	p, err := orchestrator.Start(ctx, pair(first, tr.telemetry(t, telemetryConfig())))
	require.NoError(t, err)
	_, err = p.Wait(ctx)
	require.Error(t, err, "the store refused the pair's events")

	// The pair resumes in another process: another observer, drawing
	// into the same backend.
	second := &recorder{}
	p, err = orchestrator.RunResumed(ctx, orchestrator.ResumeConfig{Pair: pair(second, tr.telemetry(t, telemetryConfig())), Timeline: first.evs})
	require.NoError(t, err)
	res, err := p.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonCompleted, res.Reason)

	spans := tr.exp.GetSpans()
	writer := named(spans, "invoke_agent writer")
	require.Len(t, writer, 1, tree(spans))
	firstRoot := writer[0].Parent
	roots := named(spans, "invoke_workflow relay")
	require.Len(t, roots, 1, "the first pair span never ended (its process was killed); the resumed one did:\n%s", tree(spans))
	root := roots[0]
	require.NotEqual(t, firstRoot.TraceID(), root.SpanContext.TraceID(), "the resumed part is a trace of its own")
	require.Len(t, root.Links, 1)
	require.Equal(t, firstRoot.TraceID(), root.Links[0].SpanContext.TraceID())
	require.Equal(t, firstRoot.SpanID(), root.Links[0].SpanContext.SpanID(), "linked to the first pair span")
	require.Equal(t, strconv.Itoa(len(first.evs)), attr(root, "spice_orch.pair.resumed_from_seq"))
	require.Equal(t, "replay", attr(root, "spice_orch.pair.resume_boundary"))
	require.Equal(t, pairID, attr(root, "gen_ai.conversation.id"))

	reviewer := named(spans, "invoke_agent reviewer")
	require.Len(t, reviewer, 1, tree(spans))
	require.Equal(t, root.SpanContext.SpanID(), reviewer[0].Parent.SpanID())
	require.Equal(t, root.SpanContext.TraceID(), reviewer[0].SpanContext.TraceID())
	require.True(t, strings.HasSuffix(attr(reviewer[0], "spice_orch.run.id"), ".r1"), attr(reviewer[0], "spice_orch.run.id"))
	require.Equal(t, "spice_orch.scripted", attr(reviewer[0], "gen_ai.provider.name"))
	chats := 0
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "chat") && s.Parent.SpanID() == reviewer[0].SpanContext.SpanID() {
			chats++
		}
	}
	require.Equal(t, 1, chats, "the restarted run's model operation (served from the record) is drawn")

	// Replayed from the whole record: one trace.
	again := newTracing(t)
	whole := strings.Join(append(first.lines, second.lines...), "")
	require.NoError(t, again.telemetry(t, telemetryConfig()).ReplayJSON(ctx, strings.NewReader(whole)))
	spans = again.exp.GetSpans()
	// (The resumed pair's injected clock starts again at zero, so its
	// run is drawn first.)
	require.Equal(t, "invoke_workflow relay\n"+
		"  invoke_agent reviewer\n"+
		"    chat scripted-1 [client]\n"+
		"  invoke_agent writer\n"+
		"    chat scripted-1 [client]\n"+
		"  invoke_agent reviewer ERROR interrupted\n"+
		"    chat scripted-1 [client] ERROR interrupted\n", tree(spans))
	roots = named(spans, "invoke_workflow relay")
	require.Len(t, roots, 1)
	var noted bool
	for _, ev := range roots[0].Events {
		noted = noted || ev.Name == "pair.resumed"
	}
	require.True(t, noted, "the pair span notes the resume")
}
