package orchestrator

import (
	"bytes"
	"encoding/hex"
	"math"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// DecodePayload reads the payload of one pair timeline event of the given
// kind from its canonical JSON (a store's row, a line of `spice-orch run
// --json`): a Started, HandedOff or Ended for the pair kinds, and a
// Relayed for every other kind. A Relayed holds the kernel payload
// (event.DecodePayload) when kind is a run event kind of this build, and
// the payload's bytes as an eventlog.Raw otherwise, so a reader can show a
// kind it does not know.
//
// It is as strict as the kernel's decoder about form: at most
// eventlog.MaxEventBytes, exactly the canonical form AppendJSON writes,
// counts from 0 to their bounds, a known reason and limit, a SHA-256. It
// takes names and IDs as the text they are, unchecked, so that a reader
// shows a hostile one escaped rather than refuse the line (S2). Errors
// are *bound.Error values that never quote the input.
// Readers of timelines (the CLI, serve, telemetry's replay) share it so
// that the payloads are decoded in one place.
func DecodePayload(kind string, raw []byte) (eventlog.Payload, error) {
	if err := bound.Bytes("payload", len(raw), eventlog.MaxEventBytes); err != nil {
		return nil, err
	}
	var p eventlog.Payload
	var err error
	switch {
	case kind == KindStarted:
		p, err = readStarted(raw)
	case kind == KindHandoff:
		p, err = readHandedOff(raw)
	case kind == KindFinalAnswer:
		p, err = readFinalAnswer(raw)
	case kind == KindResumed:
		p, err = readResumed(raw)
	case kind == KindModelOutput:
		p, err = readModelOutput(raw)
	case Terminal(kind):
		p, err = readEnded(kind, raw)
	default:
		p, err = readRelayed(kind, raw)
	}
	if err != nil {
		return nil, err
	}
	if p.EncodedLen() != len(raw) || !bytes.Equal(p.AppendJSON(make([]byte, 0, len(raw))), raw) {
		return nil, bound.Malformedf("payload", "not in canonical form")
	}
	return p, nil
}

func readStarted(raw []byte) (eventlog.Payload, error) {
	r := eventlog.ReadObject("payload", raw)
	var p Started
	p.PairID = r.String(FieldPairID)
	p.PlanID = r.String(FieldPlanID)
	fingerprint := r.String("plan_fingerprint")
	p.Pattern = r.String("pattern")
	r.Begin("workers")
	p.First = r.String("first")
	p.Second = r.String("second")
	r.End()
	if err := r.Close(); err != nil {
		return nil, err
	}
	f, err := plan.ParseFingerprint(fingerprint)
	if err != nil {
		return nil, bound.Malformedf("payload.plan_fingerprint", "not a SHA-256 in hex")
	}
	p.PlanFingerprint = f
	return p, nil
}

func readHandedOff(raw []byte) (eventlog.Payload, error) {
	r := eventlog.ReadObject("payload", raw)
	var p HandedOff
	p.Round = int(r.Int("round"))
	p.From = r.String("from")
	p.To = r.String("to")
	p.FromRunID = id.Run(r.String("from_run_id"))
	p.LastSeq = r.Uint("last_seq")
	digest := r.String("sha256")
	p.Bytes = int(r.Int("bytes"))
	p.AnswerBytes = int(r.Int("answer_bytes"))
	p.Cut = r.Bool("cut")
	if err := r.Close(); err != nil {
		return nil, err
	}
	if err := firstError(count("payload.round", p.Round), count("payload.bytes", p.Bytes),
		count("payload.answer_bytes", p.AnswerBytes)); err != nil {
		return nil, err
	}
	if len(digest) != hex.EncodedLen(len(p.SHA256)) {
		return nil, bound.Malformedf("payload.sha256", "not a SHA-256 in hex")
	}
	if _, err := hex.Decode(p.SHA256[:], []byte(digest)); err != nil {
		return nil, bound.Malformedf("payload.sha256", "not a SHA-256 in hex")
	}
	return p, nil
}

func readEnded(kind string, raw []byte) (eventlog.Payload, error) {
	r := eventlog.ReadObject("payload", raw)
	var p Ended
	p.PairID = r.String(FieldPairID)
	reason := r.String(FieldReason)
	limit := r.OptionalString("limit")
	p.Rounds = int(r.Int("rounds"))
	p.Runs = int(r.Int("runs"))
	p.InputTokens = r.Int("input_tokens")
	p.OutputTokens = r.Int("output_tokens")
	p.ToolCalls = r.Int("tool_calls")
	p.Worker = r.OptionalString(FieldWorker)
	p.RunID = id.Run(r.OptionalString(FieldRunID))
	var code, message string
	if r.OptionalBegin("problem") {
		code = r.String("code")
		message = r.OptionalString("message")
		r.End()
	}
	p.FinalAnswer = r.OptionalString("final_answer")
	if err := r.Close(); err != nil {
		return nil, err
	}
	if err := firstError(count("payload.rounds", p.Rounds), count("payload.runs", p.Runs),
		count64("payload.input_tokens", p.InputTokens), count64("payload.output_tokens", p.OutputTokens),
		count64("payload.tool_calls", p.ToolCalls)); err != nil {
		return nil, err
	}
	var ok bool
	if p.Reason, ok = parseReason(reason); !ok {
		return nil, bound.Malformedf("payload.reason", "not a pair reason")
	}
	if p.Kind() != kind {
		return nil, bound.Malformedf("payload.reason", "not a reason of this terminal kind")
	}
	if limit != "" {
		if p.Limit, ok = parseLimit(limit); !ok {
			return nil, bound.Malformedf("payload.limit", "not a budget limit")
		}
	}
	if code != "" {
		pr, err := problem.New(code, message)
		if err != nil {
			return nil, bound.Malformedf("payload.problem", "not a problem")
		}
		p.Problem = pr
	}
	return p, nil
}

func readRelayed(kind string, raw []byte) (eventlog.Payload, error) {
	r := eventlog.ReadObject("payload", raw)
	worker := r.String(FieldWorker)
	runID := id.Run(r.String(FieldRunID))
	runSeq := r.Uint(FieldRunSeq)
	inner := r.Raw(FieldPayload)
	if err := r.Close(); err != nil {
		return nil, err
	}
	var payload eventlog.Payload = inner
	if knownRunKind(kind) {
		p, err := event.DecodePayload(kind, inner.Bytes())
		if err != nil {
			return nil, err
		}
		payload = p
	}
	return NewRelayed(worker, runID, runSeq, payload), nil
}

func knownRunKind(kind string) bool {
	for k := range event.Kinds() {
		if k == kind {
			return true
		}
	}
	return false
}

func parseReason(s string) (Reason, bool) {
	for r, name := range reasonNames {
		if name != "" && name == s {
			return Reason(r), true
		}
	}
	return 0, false
}

func parseLimit(s string) (Limit, bool) {
	for l := LimitTokens; l <= LimitWallTime; l++ {
		if l.String() == s {
			return l, true
		}
	}
	return 0, false
}

// count and count64 hold a count to the bounds the pair writes it within,
// as the kernel's decoder does for run events.

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func count(field string, n int) error {
	if n < 0 || n > math.MaxInt32 {
		return bound.Malformedf(field, "must be from 0 to 2^31-1")
	}
	return nil
}

func count64(field string, n int64) error {
	if n < 0 {
		return bound.Malformedf(field, "must not be negative")
	}
	return nil
}
