package event_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

var (
	boom   = problem.Must("rate_limited", "slow down \"now\"\n")
	bare   = problem.Must("timeout", "")
	tricky = "quote \" slash \\ ctl \x01 nl \n ls \u2028 é 🚀 <&>"
)

// samples has at least one payload of every kind, with optional fields
// both set and empty.
func samples() []event.Payload {
	return []event.Payload{
		event.RunStarted{RunID: "run-1", PlanID: "plan-7", PlanFingerprint: "9f86d081884c7d65", Definition: "writer", Model: "gpt-4o-mini"},
		event.RunStarted{RunID: "run-1", PlanID: "plan-7", PlanFingerprint: "00"},
		event.RunCompleted{RunID: "run-1", Turns: 3, InputTokens: 1200, OutputTokens: 345, FinalText: tricky},
		event.RunCompleted{RunID: "run-1"},
		event.RunFailed{RunID: "run-1", Problem: boom, Turns: 3, InputTokens: 1200, OutputTokens: 345},
		event.RunCancelled{RunID: "run-1", Turns: 3, InputTokens: 1200, OutputTokens: 345},
		event.TurnStarted{RunID: "run-1", TurnID: "turn-1", Index: 0},
		event.TurnCompleted{TurnID: "turn-1", Index: 4},
		event.TurnFailed{TurnID: "turn-1", Index: 1, Problem: bare},
		event.TurnCancelled{TurnID: "turn-1", Index: 2},
		event.ModelStarted{TurnID: "turn-1", OperationID: "op-1", Model: "m"},
		event.ModelStarted{TurnID: "turn-1", OperationID: "op-1"},
		event.ModelTextDelta{OperationID: "op-1", Text: tricky},
		event.ModelCompleted{OperationID: "op-1", InputTokens: 10, OutputTokens: 20, ToolCalls: 2},
		event.ModelFailed{OperationID: "op-1", Problem: boom, Observed: true},
		event.ModelFailed{OperationID: "op-1", Problem: bare},
		event.ModelCancelled{OperationID: "op-1"},
		event.ToolStarted{TurnID: "turn-1", OperationID: "op-2", CallID: "call_abc", Name: "read_file", Effect: "read_only", Replay: "safe"},
		event.ToolStarted{TurnID: "turn-1", OperationID: "op-2", CallID: "call_x", Name: "not_in_plan"},
		event.ToolProgress{OperationID: "op-2", CallID: "call_abc", Message: "50%"},
		event.ToolCompleted{OperationID: "op-2", CallID: "call_abc", Name: "read_file", Content: tricky},
		event.ToolCompleted{OperationID: "op-2", CallID: "call_abc", Name: "read_file", Problem: boom},
		event.ToolCompleted{OperationID: "op-2", CallID: "call_abc", Name: "read_file"},
		event.ToolFailed{OperationID: "op-2", CallID: "call_abc", Name: "write_file", Outcome: "uncertain", Retry: "never", Problem: boom},
		event.ToolFailed{OperationID: "op-2", CallID: "call_abc", Name: "write_file", Outcome: "definitive", Problem: bare},
		event.ToolCancelled{OperationID: "op-2", CallID: "call_abc", Name: "write_file", Outcome: "uncertain"},
		event.InteractionStarted{InteractionID: "ix-1", TurnID: "turn-1", Prompt: "Proceed?"},
		event.InteractionStarted{InteractionID: "ix-1", Prompt: tricky},
		event.InteractionAnswered{InteractionID: "ix-1", Answer: "yes"},
		event.InteractionAnswered{InteractionID: "ix-1"},
		event.InteractionFailed{InteractionID: "ix-1", Problem: boom},
		event.InteractionCancelled{InteractionID: "ix-1"},
	}
}

func TestEveryKindHasAPayloadAndLifecycle(t *testing.T) {
	covered := map[string]bool{}
	for _, p := range samples() {
		covered[p.Kind()] = true
	}
	n := 0
	for k := range event.Kinds() {
		n++
		require.NoError(t, bound.Name("kind", k))
		require.True(t, covered[k], "no sample payload for %s", k)
	}
	require.Len(t, covered, n)

	terminals := map[string][]string{}
	for k := range event.Kinds() {
		subject, state, _ := strings.Cut(k, ".")
		if event.Terminal(k) {
			terminals[subject] = append(terminals[subject], k)
		}
		switch state {
		case "completed", "answered", "failed", "cancelled":
			require.True(t, event.Terminal(k), k)
		default:
			require.False(t, event.Terminal(k), k)
		}
	}
	for _, subject := range []string{"run", "turn", "model", "tool", "interaction"} {
		require.Len(t, terminals[subject], 3, "%s needs completed/answered, failed and cancelled", subject)
	}
	require.False(t, event.Terminal("run.unknown"))
}

// EncodedLen is exact for every payload, and every payload decodes back to
// an equal value and the same bytes.
func TestEncodedLenExactAndRoundTripForEveryKind(t *testing.T) {
	for _, p := range samples() {
		b := p.AppendJSON(nil)
		require.Equal(t, len(b), p.EncodedLen(), string(b))
		got, err := event.DecodePayload(p.Kind(), b)
		require.NoError(t, err, string(b))
		require.Equal(t, p, got)
		require.Equal(t, b, got.AppendJSON(nil))
	}
}

func TestCanonicalBytesGolden(t *testing.T) {
	for want, p := range map[string]event.Payload{
		`{"run_id":"run-1","plan_id":"plan-7","plan_fingerprint":"ab12","definition":"writer","model":"gpt-4o"}`:                        event.RunStarted{RunID: "run-1", PlanID: "plan-7", PlanFingerprint: "ab12", Definition: "writer", Model: "gpt-4o"},
		`{"run_id":"run-1","plan_id":"plan-7","plan_fingerprint":"ab12"}`:                                                               event.RunStarted{RunID: "run-1", PlanID: "plan-7", PlanFingerprint: "ab12"},
		`{"run_id":"r","problem":{"code":"rate_limited","message":"slow down \"now\"\n"},"turns":3,"input_tokens":1,"output_tokens":2}`: event.RunFailed{RunID: "r", Problem: boom, Turns: 3, InputTokens: 1, OutputTokens: 2},
		`{"operation_id":"op-1","problem":{"code":"timeout"},"observed":false}`:                                                         event.ModelFailed{OperationID: "op-1", Problem: bare},
		`{"operation_id":"op-1","text":"a\u2028b\u0001"}`:                                                                               event.ModelTextDelta{OperationID: "op-1", Text: "a\u2028b\x01"},
		`{"operation_id":"o","call_id":"c","name":"n","content":"<ok>"}`:                                                                event.ToolCompleted{OperationID: "o", CallID: "c", Name: "n", Content: "<ok>"},
		`{"operation_id":"o","call_id":"c","name":"n","outcome":"uncertain","retry":"never","problem":{"code":"timeout"}}`:              event.ToolFailed{OperationID: "o", CallID: "c", Name: "n", Outcome: "uncertain", Retry: "never", Problem: bare},
		`{"interaction_id":"ix-1"}`: event.InteractionAnswered{InteractionID: "ix-1"},
	} {
		require.Equal(t, want, string(p.AppendJSON(nil)))
	}
}

func TestDecodePayloadIsStrict(t *testing.T) {
	big := `{"operation_id":"op-1","text":"` + strings.Repeat("a", bound.MaxTextDeltaBytes+1) + `"}`
	for name, c := range map[string]struct{ kind, raw string }{
		"unknown kind":        {"run.paused", `{"run_id":"r","turns":0,"input_tokens":0,"output_tokens":0}`},
		"whitespace":          {"run.cancelled", `{"run_id":"r", "turns":0,"input_tokens":0,"output_tokens":0}`},
		"reordered":           {"run.cancelled", `{"turns":0,"run_id":"r","input_tokens":0,"output_tokens":0}`},
		"unknown field":       {"run.cancelled", `{"run_id":"r","turns":0,"input_tokens":0,"output_tokens":0,"x":1}`},
		"missing field":       {"run.cancelled", `{"run_id":"r","turns":0,"input_tokens":0}`},
		"trailing":            {"run.cancelled", `{"run_id":"r","turns":0,"input_tokens":0,"output_tokens":0}x`},
		"negative tokens":     {"run.cancelled", `{"run_id":"r","turns":0,"input_tokens":-1,"output_tokens":0}`},
		"negative index":      {"turn.completed", `{"turn_id":"t","index":-1}`},
		"bad id":              {"run.cancelled", `{"run_id":"r 1","turns":0,"input_tokens":0,"output_tokens":0}`},
		"empty id":            {"run.cancelled", `{"run_id":"","turns":0,"input_tokens":0,"output_tokens":0}`},
		"empty optional":      {"run.completed", `{"run_id":"r","turns":0,"input_tokens":0,"output_tokens":0,"final_text":""}`},
		"escaped form":        {"model.text_delta", `{"operation_id":"op-1","text":"\u0061"}`},
		"empty delta":         {"model.text_delta", `{"operation_id":"op-1","text":""}`},
		"delta too large":     {"model.text_delta", big},
		"bad problem code":    {"turn.failed", `{"turn_id":"t","index":0,"problem":{"code":"Bad Code"}}`},
		"empty problem msg":   {"turn.failed", `{"turn_id":"t","index":0,"problem":{"code":"x","message":""}}`},
		"missing problem":     {"turn.failed", `{"turn_id":"t","index":0}`},
		"too many tool calls": {"model.completed", `{"operation_id":"o","input_tokens":0,"output_tokens":0,"tool_calls":33}`},
		"bool as int":         {"model.failed", `{"operation_id":"o","problem":{"code":"x"},"observed":1}`},
		"long name":           {"tool.cancelled", `{"operation_id":"o","call_id":"c","name":"` + strings.Repeat("n", bound.MaxNameBytes+1) + `","outcome":"uncertain"}`},
		"not an object":       {"model.cancelled", `["op-1"]`},
	} {
		_, err := event.DecodePayload(c.kind, []byte(c.raw))
		require.ErrorIs(t, err, bound.ErrInvalid, name)
	}
}

// Record takes the kind and terminal class from the payload, and the log
// stores and encodes it; the encoded event decodes back to the same payload.
func TestRecordThroughTheLog(t *testing.T) {
	l, err := eventlog.New(eventlog.Config{MaxEvents: 100, MaxBytes: 1 << 20})
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close(context.Background())) }()
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

	r := event.Record(now, event.ModelCancelled{OperationID: "op-1"})
	require.Equal(t, "model.cancelled", r.Kind)
	require.True(t, r.Terminal)
	require.False(t, event.Record(now, event.ToolProgress{}).Terminal)

	for _, p := range samples() {
		e, err := l.Append(context.Background(), event.Record(now, p))
		require.NoError(t, err)
		b := e.AppendJSON(nil)
		require.Equal(t, len(b), e.EncodedLen())
		decoded, payload, err := event.Decode(b)
		require.NoError(t, err)
		require.Equal(t, p, payload)
		require.Equal(t, e.Seq(), decoded.Seq())
		require.Equal(t, b, decoded.AppendJSON(nil))
	}
	_, _, err = event.Decode([]byte(`{"seq":1,"kind":"run.paused","time":"2026-01-02T03:04:05.000000006Z","payload":{}}`))
	require.ErrorIs(t, err, bound.ErrInvalid)
}

func FuzzDecodePayload(f *testing.F) {
	var kinds []string
	for k := range event.Kinds() {
		kinds = append(kinds, k)
	}
	for _, p := range samples() {
		for i, k := range kinds {
			if k == p.Kind() {
				f.Add(uint8(i), p.AppendJSON(nil))
			}
		}
	}
	f.Fuzz(func(t *testing.T, k uint8, raw []byte) {
		if len(raw) > 1<<16 {
			return
		}
		kind := kinds[int(k)%len(kinds)]
		p, err := event.DecodePayload(kind, raw)
		if err != nil {
			require.ErrorIs(t, err, bound.ErrInvalid)
			return
		}
		require.Equal(t, kind, p.Kind())
		require.Equal(t, raw, p.AppendJSON(nil), "decode→encode gives the same bytes")
		require.Equal(t, len(raw), p.EncodedLen())
	})
}
