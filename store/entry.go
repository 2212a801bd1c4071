package store

import (
	"strconv"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// Entry is one recorded event, decoded from its stored bytes, with what the
// store can read from it for a human timeline.
type Entry struct {
	// Log is the log the event belongs to: a run ID or a pair ID.
	Log string
	// Event is the event decoded from the recorded bytes. Its payload is an
	// eventlog.Raw, and Event.AppendJSON returns exactly the recorded
	// bytes. Event.Log is empty: decoding does not name a log; use Log.
	Event eventlog.Event
	// Relayed marks a run event in a pair timeline; Worker, RunID and
	// RunSeq then name the run and its own sequence, as far as the
	// timeline's payload says.
	Relayed bool
	Worker  string
	RunID   string
	RunSeq  uint64
	// Payload is the typed run event payload (of the run's own log, or
	// relayed), nil for other kinds.
	Payload event.Payload
	// Reason is a pair terminal's reason.
	Reason string
}

// decodeRow decodes a stored row of a log of type t, checking that the
// columns describe the event its bytes hold.
func decodeRow(t logType, log string, seq int64, kind, ts string, body []byte) (Entry, error) {
	ev, err := eventlog.Decode(body)
	if err != nil {
		return Entry{}, &IntegrityError{Log: log, Seq: uint64(max(seq, 0)), Reason: reasonUndecode, Err: err}
	}
	if seq < 1 || ev.Seq() != uint64(seq) || ev.Kind() != kind || timeText(ev.Time()) != ts {
		return Entry{}, &IntegrityError{Log: log, Seq: ev.Seq(), Reason: reasonColumns}
	}
	en := Entry{Log: log, Event: ev}
	payload := payloadOf(body)
	switch {
	case t == logPair && isPairKind(kind):
		if _, ok := pairStatus(kind); ok {
			if f, ok := readPairFields(payload); ok {
				en.Reason = f.reasonText()
			}
		}
	case t == logPair:
		f, ok := readPairFields(payload)
		if !ok {
			break
		}
		r, ok := f.relayOf()
		if !ok {
			break
		}
		en.Relayed, en.Worker, en.RunID, en.RunSeq = true, r.Worker, r.RunID, r.RunSeq
		if r.Payload != nil {
			en.Payload, _ = event.DecodePayload(kind, r.Payload)
		}
	case t == logRun:
		en.Payload, _ = event.DecodePayload(kind, payload)
	}
	return en, nil
}

// Summary returns one readable line: sequence, time, the relaying worker
// and run, the kind and the few fields a person reads first. Long texts
// appear as their size, not their content.
func (en Entry) Summary() string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(en.Event.Seq(), 10))
	b.WriteByte(' ')
	b.WriteString(timeText(en.Event.Time()))
	if en.Relayed {
		b.WriteString(" [")
		if en.Worker != "" {
			b.WriteString(en.Worker)
			b.WriteByte(' ')
		}
		b.WriteString(en.RunID)
		b.WriteByte('#')
		b.WriteString(strconv.FormatUint(en.RunSeq, 10))
		b.WriteByte(']')
	}
	b.WriteByte(' ')
	b.WriteString(en.Event.Kind())
	if d := en.detail(); d != "" {
		b.WriteByte(' ')
		b.WriteString(d)
	}
	return b.String()
}

func (en Entry) detail() string {
	if en.Reason != "" {
		return "reason=" + strconv.Quote(en.Reason)
	}
	switch p := en.Payload.(type) {
	case event.RunStarted:
		return "plan=" + p.PlanID + optional(" definition=", p.Definition) + optional(" model=", p.Model)
	case event.RunCompleted:
		return usageText(p.Turns, p.InputTokens, p.OutputTokens)
	case event.RunFailed:
		return "problem=" + strconv.Quote(p.Problem.String()) + " " + usageText(p.Turns, p.InputTokens, p.OutputTokens)
	case event.RunCancelled:
		return usageText(p.Turns, p.InputTokens, p.OutputTokens)
	case event.TurnStarted:
		return "turn=" + strconv.Itoa(p.Index)
	case event.TurnFailed:
		return "problem=" + strconv.Quote(p.Problem.String())
	case event.ModelTextDelta:
		return "text=" + strconv.Itoa(len(p.Text)) + "B"
	case event.ModelCompleted:
		return "tokens=" + strconv.FormatInt(p.InputTokens, 10) + "/" + strconv.FormatInt(p.OutputTokens, 10) +
			" tool_calls=" + strconv.Itoa(p.ToolCalls)
	case event.ModelFailed:
		return "problem=" + strconv.Quote(p.Problem.String())
	case event.ToolStarted:
		return p.Name + optional(" effect=", p.Effect) + optional(" replay=", p.Replay) + " call=" + string(p.CallID)
	case event.ToolCompleted:
		return p.Name + optional(" problem=", p.Problem.Code())
	case event.ToolFailed:
		return p.Name + " outcome=" + p.Outcome + " problem=" + strconv.Quote(p.Problem.String())
	case event.ToolCancelled:
		return p.Name + " outcome=" + p.Outcome
	case event.InteractionFailed:
		return "problem=" + strconv.Quote(p.Problem.String())
	}
	return ""
}

func optional(label, v string) string {
	if v == "" {
		return ""
	}
	return label + v
}

func usageText(turns int, in, out int64) string {
	return "turns=" + strconv.Itoa(turns) + " tokens=" + strconv.FormatInt(in, 10) + "/" + strconv.FormatInt(out, 10)
}
