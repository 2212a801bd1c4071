package orchestrator_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// TestO7_DecodePayloadReadsWhatThePairWrote decodes every event of a
// played pair (tool call, two rounds, handoffs, terminal) and of each
// terminal shape back into the payload that wrote it.
func TestO7_DecodePayloadReadsWhatThePairWrote(t *testing.T) {
	p, _, err := approvedInTwoRounds(t, orchestrator.Live).run(t)
	require.NoError(t, err)
	payloads := []struct {
		kind string
		p    eventlog.Payload
	}{}
	for _, e := range timeline(t, p) {
		payloads = append(payloads, struct {
			kind string
			p    eventlog.Payload
		}{e.Kind(), e.Payload()})
	}
	for _, e := range []orchestrator.Ended{
		{PairID: "p-1", Reason: orchestrator.ReasonCompleted, Rounds: 1, Runs: 2, InputTokens: 20, OutputTokens: 10},
		{PairID: "p-1", Reason: orchestrator.ReasonBudgetExhausted, Limit: orchestrator.LimitToolCalls, Rounds: 1, Runs: 1,
			ToolCalls: 2, Worker: "writer", RunID: "run-1", Problem: problem.Must("x", `y "z"`)},
		{PairID: "p-1", Reason: orchestrator.ReasonCancelled},
		{PairID: "p-1", Reason: orchestrator.ReasonInfrastructure, Problem: problem.Must("store_failed", "")},
	} {
		payloads = append(payloads, struct {
			kind string
			p    eventlog.Payload
		}{e.Kind(), e})
	}
	seen := map[string]bool{}
	for _, c := range payloads {
		raw := c.p.AppendJSON(nil)
		got, err := orchestrator.DecodePayload(c.kind, raw)
		require.NoError(t, err, "%s %s", c.kind, raw)
		require.Equal(t, string(raw), string(got.AppendJSON(nil)), c.kind)
		switch want := c.p.(type) {
		case orchestrator.Relayed:
			r := got.(orchestrator.Relayed)
			require.Equal(t, want.Worker(), r.Worker())
			require.Equal(t, want.RunID(), r.RunID())
			require.Equal(t, want.RunSeq(), r.RunSeq())
			require.Equal(t, want.Payload(), r.Payload(), "the kernel payload, typed")
		default:
			require.Equal(t, want, got)
		}
		seen[c.kind] = true
	}
	for _, k := range []string{"pair.started", "pair.handoff", "pair.completed", "pair.failed", "pair.cancelled", "tool.started", "tool.completed"} {
		require.True(t, seen[k], k)
	}
}

func TestO7_DecodePayloadKeepsAnUnknownRunKindRaw(t *testing.T) {
	raw := []byte(`{"worker":"writer","run_id":"run-1","run_seq":3,"payload":{"x":1}}`)
	got, err := orchestrator.DecodePayload("run.paused", raw)
	require.NoError(t, err)
	r := got.(orchestrator.Relayed)
	require.Equal(t, "writer", r.Worker())
	require.Equal(t, uint64(3), r.RunSeq())
	_, typed := r.Payload().(event.Payload)
	require.False(t, typed)
	require.Equal(t, `{"x":1}`, string(r.Payload().AppendJSON(nil)))
}

func TestO7_DecodePayloadRefusesWhatThePairCannotHaveWritten(t *testing.T) {
	started := orchestrator.Started{PairID: "p-1", PlanID: "plan-1", PlanFingerprint: plan.Fingerprint{0xab},
		Pattern: "relay", First: "writer", Second: "reviewer"}
	good := string(started.AppendJSON(nil))
	ended := `{"pair_id":"p-1","reason":"completed","rounds":1,"runs":2,"input_tokens":20,"output_tokens":10,"tool_calls":0}`
	for name, c := range map[string]struct{ kind, raw string }{
		"an unknown field":         {"pair.started", strings.Replace(good, `"pattern"`, `"patterns"`, 1)},
		"fields out of order":      {"pair.started", `{"plan_id":"plan-1","pair_id":"p-1"}`},
		"trailing bytes":           {"pair.started", good + " "},
		"not canonical":            {"pair.started", strings.Replace(good, `:"relay"`, `: "relay"`, 1)},
		"a short fingerprint":      {"pair.started", `{"pair_id":"p-1","plan_id":"plan-1","plan_fingerprint":"ab","pattern":"relay","workers":{"first":"w","second":"r"}}`},
		"a bad digest":             {"pair.handoff", `{"round":1,"from":"a","to":"b","from_run_id":"r","last_seq":1,"sha256":"zz","bytes":1,"answer_bytes":1,"cut":false}`},
		"an unknown reason":        {"pair.completed", strings.Replace(ended, `"completed"`, `"finished"`, 1)},
		"a reason of another kind": {"pair.failed", ended},
		"an unknown limit":         {"pair.failed", `{"pair_id":"p-1","reason":"budget_exhausted","limit":"bananas","rounds":1,"runs":2,"input_tokens":20,"output_tokens":10,"tool_calls":0}`},
		"a bad kernel payload":     {"run.started", `{"worker":"w","run_id":"r","run_seq":1,"payload":{"x":1}}`},
		"not an object":            {"pair.handoff", `[]`},
		"oversized":                {"pair.started", `{"pair_id":"` + strings.Repeat("a", eventlog.MaxEventBytes) + `"}`},
		"a negative round":         {"pair.handoff", `{"round":-1,"from":"a","to":"b","from_run_id":"r","last_seq":1,"sha256":"` + strings.Repeat("0", 64) + `","bytes":1,"answer_bytes":1,"cut":false}`},
		"negative bytes":           {"pair.handoff", `{"round":1,"from":"a","to":"b","from_run_id":"r","last_seq":1,"sha256":"` + strings.Repeat("0", 64) + `","bytes":-1,"answer_bytes":1,"cut":false}`},
		"negative tokens":          {"pair.completed", strings.Replace(ended, `"input_tokens":20`, `"input_tokens":-20`, 1)},
		"negative runs":            {"pair.completed", strings.Replace(ended, `"runs":2`, `"runs":-2`, 1)},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := orchestrator.DecodePayload(c.kind, []byte(c.raw))
			require.Nil(t, p)
			var be *bound.Error
			require.True(t, errors.As(err, &be), "%v", err)
			require.NotContains(t, err.Error(), "bananas", "errors never quote the input")
		})
	}
}

func FuzzDecodePayload(f *testing.F) {
	f.Add("pair.started", []byte(`{"pair_id":"p-1","plan_id":"plan-1","plan_fingerprint":"`+strings.Repeat("0", 64)+`","pattern":"relay","workers":{"first":"writer","second":"reviewer"}}`))
	f.Add("pair.failed", []byte(`{"pair_id":"p-1","reason":"worker_failed","rounds":1,"runs":1,"input_tokens":0,"output_tokens":0,"tool_calls":0,"worker":"writer","run_id":"run-1","problem":{"code":"x","message":"y"}}`))
	f.Add("model.delta", []byte(`{"worker":"w","run_id":"r","run_seq":1,"payload":{"text":"hi"}}`))
	f.Add("pair.final_answer", []byte(`{"worker":"writer","reason":"budget_exhausted","limit":"tokens","tokens":12}`))
	f.Add("pair.failed", []byte(`{"pair_id":"p-1","reason":"max_rounds","rounds":1,"runs":3,"input_tokens":0,"output_tokens":0,"tool_calls":0,"final_answer":"writer"}`))
	f.Add("pair.resumed", []byte(`{"pair_id":"p-1","from_seq":9,"resumes":1,"boundary":"replay","worker":"writer","run_id":"r-1","served_model":1,"served_tools":2,"accepted":["c-1"]}`))
	f.Add("pair.model_output", []byte(`{"worker":"writer","operation_id":"op-1","text":"hi","calls":{"0":{"id":"c-1","name":"write","arguments":"{\"k\":1}"}},"input_tokens":3,"output_tokens":2}`))
	f.Fuzz(func(t *testing.T, kind string, raw []byte) {
		p, err := orchestrator.DecodePayload(kind, raw)
		if err != nil {
			var be *bound.Error
			if !errors.As(err, &be) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		if got := p.AppendJSON(nil); string(got) != string(raw) {
			t.Fatalf("decoded %q re-encodes as %q", raw, got)
		}
	})
}
