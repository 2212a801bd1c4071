package telemetry

import (
	"encoding/hex"
	"time"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// stepClass says what a timeline event is to the drawing.
type stepClass uint8

const (
	stepRun     stepClass = iota + 1 // a relayed run event
	stepStart                        // pair.started
	stepHandoff                      // pair.handoff
	stepEnd                          // a pair terminal
	stepResume                       // pair.resumed
	stepNote                         // pair.model_output: nothing to draw
)

// step is one timeline event in the form the drawing reads, whether it
// came from a live timeline (typed payloads) or from recorded JSON lines:
// both become the same step, so both draw the same trace.
type step struct {
	class stepClass
	seq   uint64
	kind  string
	at    time.Time

	start   *pairStart  // stepStart
	resume  *pairResume // stepResume
	handoff handoffStep
	end     pairEnd

	worker string // stepRun
	runID  id.Run
	run    event.Payload
}

type pairStart struct {
	pairID, planID, fingerprint, pattern, first, second string
}

type pairResume struct {
	pairID           string
	fromSeq          uint64
	resumes          int
	boundary, worker string
	runID            id.Run
}

type handoffStep struct {
	round              int
	from, to, fromRun  string
	lastSeq            uint64
	digest             string
	bytes, answerBytes int
	cut                bool
}

type pairEnd struct {
	reason, limit       string
	rounds, runs        int
	in, out, toolCalls  int64
	worker, runID, code string
}

// liveStep reads a live timeline event. A relayed timeline whose payloads
// are already JSON (eventlog.Raw) is read as a replay reads it.
func liveStep(e eventlog.Event) (step, bool) {
	pl := e.Payload()
	if raw, ok := pl.(eventlog.Raw); ok {
		p, err := orchestrator.DecodePayload(e.Kind(), raw.Bytes())
		if err != nil {
			return step{}, false
		}
		pl = p
	}
	return stepOf(e, pl)
}

// stepOf reads a timeline event whose payload is typed (a live one, or
// one orchestrator.DecodePayload read back). A relayed payload must be a
// kernel run event.
func stepOf(e eventlog.Event, pl eventlog.Payload) (step, bool) {
	st := step{seq: e.Seq(), kind: e.Kind(), at: e.Time()}
	switch p := pl.(type) {
	case orchestrator.Relayed:
		pl, ok := p.Payload().(event.Payload)
		if !ok {
			return st, false
		}
		st.class, st.worker, st.runID, st.run = stepRun, p.Worker(), p.RunID(), pl
	case orchestrator.Started:
		st.class = stepStart
		st.start = &pairStart{pairID: p.PairID, planID: p.PlanID, fingerprint: p.PlanFingerprint.String(),
			pattern: p.Pattern, first: p.First, second: p.Second}
	case orchestrator.HandedOff:
		st.class = stepHandoff
		st.handoff = handoffStep{round: p.Round, from: p.From, to: p.To, fromRun: string(p.FromRunID),
			lastSeq: p.LastSeq, digest: hex.EncodeToString(p.SHA256[:]), bytes: p.Bytes,
			answerBytes: p.AnswerBytes, cut: p.Cut}
	case orchestrator.Ended:
		st.class = stepEnd
		st.end = pairEnd{reason: p.Reason.String(), rounds: p.Rounds, runs: p.Runs,
			in: p.InputTokens, out: p.OutputTokens, toolCalls: p.ToolCalls,
			worker: p.Worker, runID: string(p.RunID), code: p.Problem.Code()}
		if p.Limit != 0 {
			st.end.limit = p.Limit.String()
		}
	case orchestrator.Resumed:
		st.class = stepResume
		st.resume = &pairResume{pairID: p.PairID, fromSeq: p.FromSeq, resumes: p.Resumes, boundary: p.Boundary,
			worker: p.Worker, runID: p.RunID}
	case orchestrator.ModelOutput:
		st.class = stepNote
	default:
		return st, false
	}
	return st, true
}
