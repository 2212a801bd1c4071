package render_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/orchestrator"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// lines appends the payloads to a timeline log, one second of 0.1 s
// apart, and returns the canonical JSON lines, as `run --json` prints them.
func lines(t *testing.T, payloads ...eventlog.Payload) [][]byte {
	t.Helper()
	l, err := eventlog.New(eventlog.Config{MaxEvents: 256, MaxBytes: 1 << 20})
	require.NoError(t, err)
	var out [][]byte
	for i, p := range payloads {
		e, err := l.Append(context.Background(), eventlog.Record{Kind: kindOf(p), Time: t0.Add(time.Duration(i) * 100 * time.Millisecond), Payload: p})
		require.NoError(t, err)
		out = append(out, append(e.AppendJSON(nil), '\n'))
	}
	return out
}

// kindOf is the timeline kind of p: its own, its relayed payload's, or
// "custom.thing" for a relayed payload without one (a kind this build
// does not know).
func kindOf(p eventlog.Payload) string {
	switch p := p.(type) {
	case interface{ Kind() string }:
		return p.Kind()
	case orchestrator.Relayed:
		if k, ok := p.Payload().(interface{ Kind() string }); ok {
			return k.Kind()
		}
		return "custom.thing"
	}
	return ""
}

func relay(worker string, seq uint64, p eventlog.Payload) orchestrator.Relayed {
	return orchestrator.NewRelayed(worker, id.Run("pair-1/"+worker+"/run-1"), seq, p)
}

func TestRendersEveryPartOfAPairTimeline(t *testing.T) {
	raw, err := eventlog.NewRaw([]byte(`{"a":1}`))
	require.NoError(t, err)
	w, r := "writer", "reviewer"
	ls := lines(t,
		orchestrator.Started{PairID: "pair-1", PlanID: "plan-1", PlanFingerprint: plan.Fingerprint{0xab}, Pattern: "review_loop", First: w, Second: r},
		relay(w, 1, event.RunStarted{RunID: "pair-1/writer/run-1", PlanID: "plan-1", PlanFingerprint: "ab", Definition: w, Model: "m-1"}),
		relay(w, 2, event.TurnStarted{RunID: "pair-1/writer/run-1", TurnID: "t1", Index: 1}),
		relay(w, 3, event.ToolStarted{TurnID: "t1", OperationID: "op-2", CallID: "c1", Name: "fs.write", Effect: "mutating", Replay: "idempotent"}),
		relay(w, 4, event.ToolCompleted{OperationID: "op-2", CallID: "c1", Name: "fs.write",
			Problem: problem.Must("path_outside_workspace", "the path leaves the workspace")}),
		relay(w, 5, event.ToolStarted{TurnID: "t1", OperationID: "op-3", CallID: "c2", Name: "text.stats", Effect: "read_only", Replay: "safe"}),
		relay(w, 6, event.ToolCompleted{OperationID: "op-3", CallID: "c2", Name: "text.stats", Content: "{\"words\":2,\n\"lines\":1}"}),
		relay(w, 7, event.ModelTextDelta{OperationID: "op-4", Text: "Hello\nwor"}),
		relay(w, 8, event.ModelTextDelta{OperationID: "op-4", Text: "ld"}),
		relay(w, 9, event.ModelCompleted{OperationID: "op-4", InputTokens: 10, OutputTokens: 5}),
		relay(w, 10, event.RunCompleted{RunID: "pair-1/writer/run-1", Turns: 1, InputTokens: 10, OutputTokens: 5}),
		orchestrator.HandedOff{Round: 1, From: w, To: r, FromRunID: "pair-1/writer/run-1", LastSeq: 10,
			SHA256: [32]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99}, Bytes: 40, AnswerBytes: 90, Cut: true},
		relay(r, 1, event.ToolStarted{TurnID: "t9", OperationID: "op-9", CallID: "c9", Name: "fs.write", Effect: "mutating"}),
		relay(r, 2, event.ToolFailed{OperationID: "op-9", CallID: "c9", Name: "fs.write", Outcome: "uncertain",
			Problem: problem.Must("write_uncertain", "may have changed")}),
		relay(r, 3, raw),
		relay(r, 4, event.RunFailed{RunID: "pair-1/reviewer/run-1", Turns: 1, Problem: problem.Must("boom", "it\nbroke")}),
		orchestrator.Ended{PairID: "pair-1", Reason: orchestrator.ReasonWorkerFailed, Rounds: 1, Runs: 2,
			InputTokens: 10, OutputTokens: 5, ToolCalls: 3, Worker: r, RunID: "pair-1/reviewer/run-1",
			Problem: problem.Must("boom", "it broke")},
	)
	var out bytes.Buffer
	rd := render.New(&out, render.Options{})
	for _, l := range ls {
		require.NoError(t, rd.Line(l))
	}
	want := `pair pair-1: review loop, writer then reviewer, plan plan-1
[writer]   run pair-1/writer/run-1 started, model m-1
[writer]   turn 1
[writer]   tool fs.write (mutating)
[writer]     -> problem path_outside_workspace: the path leaves the workspace
[writer]   tool text.stats (read-only)
[writer]     -> ok {"words":2, "lines":1}
[writer]   | Hello
[writer]   | world
[writer]   run completed: 1 turn, 10 in / 5 out tokens
[handoff]  writer -> reviewer, round 1: 40 bytes (cut from 90 bytes), sha256 001122334455
[reviewer] tool fs.write (mutating)
[reviewer]   -> failed (uncertain) write_uncertain: may have changed
[reviewer] custom.thing
[reviewer] run failed: boom: it broke
pair failed: worker_failed
  worker reviewer (run pair-1/reviewer/run-1) problem boom: it broke
  1 round, 2 runs, 3 tool calls, 10 in / 5 out tokens, 1.6s
`
	require.Equal(t, want, out.String())

	sum := rd.Summary()
	require.Equal(t, "pair-1", sum.PairID)
	require.Equal(t, "plan-1", sum.PlanID)
	require.Equal(t, [2]string{w, r}, sum.Workers)
	require.Equal(t, "pair.failed", sum.Kind)
	require.Equal(t, "worker_failed", sum.Reason)
	require.Equal(t, 1600*time.Millisecond, sum.Duration())
	require.Equal(t, int64(3), sum.ToolCalls)
	require.Equal(t, len(ls), sum.Events)
	require.Equal(t, uint64(len(ls)), sum.LastSeq)
}

func TestCancelledAndBudgetTerminals(t *testing.T) {
	ls := lines(t,
		orchestrator.Started{PairID: "p", PlanID: "plan", Pattern: "relay", First: "a", Second: "b"},
		relay("a", 1, event.ModelTextDelta{OperationID: "op-1", Text: "partial"}),
		relay("a", 2, event.RunCancelled{RunID: "pair-1/a/run-1", Turns: 1}),
		orchestrator.Ended{PairID: "p", Reason: orchestrator.ReasonCancelled, Runs: 1, Rounds: 1},
	)
	var out bytes.Buffer
	rd := render.New(&out, render.Options{})
	for _, l := range ls {
		require.NoError(t, rd.Line(l))
	}
	require.Equal(t, `pair p: relay, a then b, plan plan
[a]       | partial
[a]       run cancelled after 1 turn
pair cancelled: cancelled
  1 round, 1 run, 0 tool calls, 0 in / 0 out tokens, 300ms
`, out.String())

	budget := lines(t, orchestrator.Ended{PairID: "p", Reason: orchestrator.ReasonBudgetExhausted, Limit: orchestrator.LimitToolCalls})
	out.Reset()
	require.NoError(t, render.New(&out, render.Options{}).Line(budget[0]))
	require.Contains(t, out.String(), "pair failed: budget_exhausted (tool_calls)\n")
}

func TestColorOnlyWhenAsked(t *testing.T) {
	ls := lines(t, orchestrator.Started{PairID: "p", PlanID: "plan", Pattern: "relay", First: "a", Second: "b"})
	var plain, color bytes.Buffer
	require.NoError(t, render.New(&plain, render.Options{}).Line(ls[0]))
	require.NoError(t, render.New(&color, render.Options{Color: true}).Line(ls[0]))
	require.NotContains(t, plain.String(), "\x1b[")
	require.Contains(t, color.String(), "\x1b[")
}

func TestLinesThatDoNotDecodeAreErrorsAndRenderNothing(t *testing.T) {
	var out bytes.Buffer
	rd := render.New(&out, render.Options{})
	for _, bad := range []string{"", "{}", `{"seq":1,"kind":"pair.started","time":"x","payload":{}}`, "not json\n"} {
		require.Error(t, rd.Line([]byte(bad)), bad)
	}
	// A pair payload of the wrong shape.
	l, err := eventlog.New(eventlog.Config{MaxEvents: 16, MaxBytes: 1 << 20})
	require.NoError(t, err)
	raw, err := eventlog.NewRaw([]byte(`{"pair_id":1}`))
	require.NoError(t, err)
	e, err := l.Append(context.Background(), eventlog.Record{Kind: orchestrator.KindStarted, Time: t0, Payload: raw})
	require.NoError(t, err)
	require.Error(t, rd.Line(e.AppendJSON(nil)))
	require.Empty(t, out.String())
	require.Zero(t, rd.Summary().Events)
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0ms", 850 * time.Millisecond: "850ms", 2400 * time.Millisecond: "2.4s", 185 * time.Second: "3m05s",
	} {
		require.Equal(t, want, render.FormatDuration(d))
	}
	require.True(t, strings.HasSuffix(render.FormatDuration(2*time.Hour), "m00s"))
}

// A resumed pair's output starts at pair.resumed, which says from where;
// the journal of model outputs renders nothing.
func TestR3_ResumedPairSaysFromWhere(t *testing.T) {
	ls := lines(t,
		orchestrator.Resumed{PairID: "p", FromSeq: 20, Resumes: 1, Boundary: "replay", Worker: "a", RunID: "p/a/run-1",
			ServedModel: 1, ServedTools: 2, Accepted: []id.Call{"c-1"}},
		orchestrator.ModelOutput{Worker: "a", OperationID: "op-1", Text: "done"},
		orchestrator.Ended{PairID: "p", Reason: orchestrator.ReasonCompleted, Runs: 2, Rounds: 1},
	)
	var out bytes.Buffer
	rd := render.New(&out, render.Options{})
	for _, l := range ls {
		require.NoError(t, rd.Line(l))
	}
	require.Equal(t, `pair resumed after sequence 20: restarting a's run p/a/run-1 (1 model answer and 2 tool outcomes served from the record)
  call c-1 accepted as failed: not run again
pair completed: completed
  1 round, 2 runs, 0 tool calls, 0 in / 0 out tokens, 200ms
`, out.String())
}
