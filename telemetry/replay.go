package telemetry

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// MaxReplayEvents bounds the events one ReplayJSON reads.
const MaxReplayEvents = 1 << 20

// ErrMalformed is the cause of every error of a timeline that cannot be
// read (errors.Is); *ReplayError says which line.
var ErrMalformed = errors.New("telemetry: malformed timeline")

// ReplayError reports a line of a recorded timeline that could not be
// read. It never quotes the input.
type ReplayError struct {
	Line int   // 1-based
	Err  error // a *bound.Error, or ErrMalformed
}

func (e *ReplayError) Error() string {
	return "telemetry: timeline line " + strconv.Itoa(e.Line) + ": " + e.Err.Error()
}

func (e *ReplayError) Unwrap() error { return e.Err }

// Is makes every ReplayError match ErrMalformed.
func (e *ReplayError) Is(target error) bool { return target == ErrMalformed }

// ReplayJSON draws a recorded pair timeline — JSON lines as `spice-orch
// run --json` printed them and store.Store.ReplayJSON writes them — as the
// trace the pair drew live: the same spans, times, attributes and, with
// IDGenerator, IDs. It records no metrics (they were recorded live). A
// timeline without its terminal (an interrupted pair) ends its open spans
// at its last event, as interrupted.
//
// Every line is checked as the kernel checks an encoded event (at most
// eventlog.MaxEventBytes, canonical) before anything is drawn from it; a
// bad line stops the replay with a *ReplayError and ends what was drawn.
// Lines must come from one pair, starting with its pair.started. ctx only
// stops the reading.
func (t *Telemetry) ReplayJSON(ctx context.Context, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), eventlog.MaxEventBytes+1)
	key := ""
	defer func() {
		if key != "" {
			t.finish(key)
		}
	}()
	line := 0
	for sc.Scan() {
		line++
		if err := ctx.Err(); err != nil {
			return err
		}
		if line > MaxReplayEvents {
			return &ReplayError{Line: line, Err: bound.Count("timeline.events", line, MaxReplayEvents)}
		}
		b := bytes.TrimSuffix(sc.Bytes(), []byte{'\r'})
		if len(b) == 0 {
			continue
		}
		e, err := eventlog.Decode(b)
		if err != nil {
			return &ReplayError{Line: line, Err: err}
		}
		raw, _ := e.Payload().(eventlog.Raw)
		st, err := decodeStep(e.Kind(), raw.Bytes())
		if err != nil {
			return &ReplayError{Line: line, Err: err}
		}
		st.seq, st.at = e.Seq(), e.Time()
		switch {
		case key == "" && st.class != stepStart:
			return &ReplayError{Line: line, Err: errors.New("the timeline does not start with pair.started")}
		case key != "" && st.class == stepStart:
			return &ReplayError{Line: line, Err: errors.New("a second pair.started")}
		case key == "":
			// A replay is named apart from live pairs, so it can run
			// while the pair it replays is drawn live.
			key = "replay\x00" + st.start.pairID + "\x00" + strconv.FormatUint(t.replays.Add(1), 10)
		}
		t.draw(key, st, false)
		if st.class == stepEnd {
			key = "" // drawn to the end
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &ReplayError{Line: line + 1, Err: bound.Bytes("timeline.line", eventlog.MaxEventBytes+1, eventlog.MaxEventBytes)}
		}
		return err
	}
	return nil
}

// decodeStep reads the payload of one recorded timeline event: a pair
// event's own payload, or a relayed run event's envelope and the kernel
// payload inside it (event.DecodePayload, strict).
func decodeStep(kind string, raw []byte) (step, error) {
	st := step{kind: kind}
	switch kind {
	case orchestrator.KindStarted:
		var p struct {
			PairID          string `json:"pair_id"`
			PlanID          string `json:"plan_id"`
			PlanFingerprint string `json:"plan_fingerprint"`
			Pattern         string `json:"pattern"`
			Workers         struct {
				First  string `json:"first"`
				Second string `json:"second"`
			} `json:"workers"`
		}
		if err := strict(raw, &p); err != nil {
			return st, err
		}
		if err := id.Check("pair_id", p.PairID); err != nil {
			return st, err
		}
		st.class = stepStart
		st.start = &pairStart{pairID: p.PairID, planID: p.PlanID, fingerprint: p.PlanFingerprint,
			pattern: p.Pattern, first: p.Workers.First, second: p.Workers.Second}
	case orchestrator.KindHandoff:
		var p struct {
			Round       int    `json:"round"`
			From        string `json:"from"`
			To          string `json:"to"`
			FromRunID   string `json:"from_run_id"`
			LastSeq     uint64 `json:"last_seq"`
			SHA256      string `json:"sha256"`
			Bytes       int    `json:"bytes"`
			AnswerBytes int    `json:"answer_bytes"`
			Cut         bool   `json:"cut"`
		}
		if err := strict(raw, &p); err != nil {
			return st, err
		}
		st.class = stepHandoff
		st.handoff = handoffStep{round: p.Round, from: p.From, to: p.To, fromRun: p.FromRunID,
			lastSeq: p.LastSeq, digest: p.SHA256, bytes: p.Bytes, answerBytes: p.AnswerBytes, cut: p.Cut}
	case orchestrator.KindCompleted, orchestrator.KindFailed, orchestrator.KindCancelled:
		var p struct {
			PairID       string `json:"pair_id"`
			Reason       string `json:"reason"`
			Limit        string `json:"limit"`
			Rounds       int    `json:"rounds"`
			Runs         int    `json:"runs"`
			InputTokens  int64  `json:"input_tokens"`
			OutputTokens int64  `json:"output_tokens"`
			ToolCalls    int64  `json:"tool_calls"`
			Worker       string `json:"worker"`
			RunID        string `json:"run_id"`
			Problem      struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"problem"`
		}
		if err := strict(raw, &p); err != nil {
			return st, err
		}
		st.class = stepEnd
		st.end = pairEnd{reason: p.Reason, limit: p.Limit, rounds: p.Rounds, runs: p.Runs,
			in: p.InputTokens, out: p.OutputTokens, toolCalls: p.ToolCalls,
			worker: p.Worker, runID: p.RunID, code: p.Problem.Code}
	default:
		var p struct {
			Worker  string          `json:"worker"`
			RunID   string          `json:"run_id"`
			RunSeq  uint64          `json:"run_seq"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := strict(raw, &p); err != nil {
			return st, err
		}
		pl, err := event.DecodePayload(kind, p.Payload)
		if err != nil {
			return st, err
		}
		st.class, st.worker, st.runID, st.run = stepRun, p.Worker, id.Run(p.RunID), pl
	}
	return st, nil
}

// strict decodes one JSON object with no unknown fields and nothing after
// it. Its errors never quote the input.
func strict(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return bound.Malformedf("payload", "not the payload of its kind")
	}
	if d.More() {
		return bound.Malformedf("payload", "trailing data")
	}
	return nil
}
