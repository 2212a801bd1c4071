package render_test

import (
	"bytes"
	"context"
	"testing"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// FuzzRendererLine: render reads lines from outside (`run --json` piped in,
// a saved timeline). Whatever a line holds, Line does not panic; a line it
// refuses renders nothing and is not counted; and what it renders without
// color is valid UTF-8 with no control byte but newlines, so a payload
// cannot drive the terminal.
func FuzzRendererLine(f *testing.F) {
	l, err := eventlog.New(eventlog.Config{MaxEvents: 64, MaxBytes: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range []eventlog.Payload{
		orchestrator.Started{PairID: "pair-1", PlanID: "plan-1", PlanFingerprint: plan.Fingerprint{0xab}, Pattern: "relay", First: "writer", Second: "reviewer"},
		relay("writer", 1, event.RunStarted{RunID: "pair-1/writer/run-1", PlanID: "plan-1", PlanFingerprint: "ab", Definition: "writer", Model: "m\x1b[31m"}),
		relay("writer", 2, event.ModelTextDelta{OperationID: "op-1", Text: "a\x1b]0;x\x07b\r\n"}),
		relay("writer", 3, event.ToolCompleted{OperationID: "op-2", CallID: "c1", Name: "fs.write", Problem: problem.Must("x", "\x1b[2J")}),
		orchestrator.HandedOff{Round: 1, From: "writer", To: "reviewer", FromRunID: "pair-1/writer/run-1", LastSeq: 3, Bytes: 1, AnswerBytes: 1},
		orchestrator.Ended{PairID: "pair-1", Reason: orchestrator.ReasonWorkerFailed, Rounds: 1, Runs: 2, Worker: "w\x1b", Problem: problem.Must("boom", "it\nbroke")},
	} {
		e, err := l.Append(context.Background(), eventlog.Record{Kind: kindOf(p), Time: t0, Payload: p})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(e.AppendJSON(nil))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var out bytes.Buffer
		rd := render.New(&out, render.Options{})
		if err := rd.Line(line); err != nil {
			if out.Len() != 0 || rd.Summary().Events != 0 {
				t.Fatalf("a refused line rendered %q", out.Bytes())
			}
			return
		}
		if !utf8.Valid(out.Bytes()) {
			t.Fatalf("rendered invalid UTF-8: %q", out.Bytes())
		}
		for _, r := range out.String() {
			if r != '\n' && (r < 0x20 || r == 0x7f || 0x80 <= r && r < 0xa0) {
				t.Fatalf("rendered control character %U: %q", r, out.Bytes())
			}
		}
	})
}
