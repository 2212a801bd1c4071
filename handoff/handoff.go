package handoff

import (
	"crypto/sha256"
	"encoding/hex"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
)

// Input is a finished run seen from outside: who ran it, and its result.
type Input struct {
	// Task is the pair's task, repeated in every handoff so that the next
	// worker, whose engine never saw the earlier runs, knows what it is
	// for. It may be empty.
	Task string
	// From is the role of the worker whose run finished; To the role that
	// will read the message. Both are bound.Names.
	From, To string
	// RunID names the finished run.
	RunID id.Run
	// Result is the finished run's result. Only its final answer's text
	// and its last sequence are read; the run must have completed.
	Result engine.Result
}

// Provenance records where a handoff came from. The orchestrator keeps it
// in its own timeline; it never enters a kernel message (O3).
type Provenance struct {
	From, To string
	RunID    id.Run
	// LastSeq is the last sequence of the finished run's event log.
	LastSeq uint64
	// SHA256 is the digest of the message text, Bytes its size.
	SHA256 [sha256.Size]byte
	Bytes  int
	// AnswerBytes is the size of the final answer's text before framing;
	// Cut reports that the policy shortened it to fit the bound.
	AnswerBytes int
	Cut         bool
}

// Digest returns SHA256 in lower-case hex.
func (p Provenance) Digest() string {
	var buf [2 * sha256.Size]byte
	hex.Encode(buf[:], p.SHA256[:])
	return string(buf[:])
}

// Handoff is one message for the next worker plus its provenance. It is an
// immutable value.
type Handoff struct {
	msg  message.Message
	prov Provenance
}

// Message returns the user message the next worker starts from.
func (h Handoff) Message() message.Message { return h.msg }

// Provenance returns where the message came from.
func (h Handoff) Provenance() Provenance { return h.prov }

// IsZero reports whether h is the zero Handoff.
func (h Handoff) IsZero() bool { return h.msg.IsZero() }

// Build frames the final answer of in.Result as one user message:
//
//	<task heading>:
//	<task>
//
//	<heading of in.From>:
//	<final answer text>
//
// (the task block is left out when the task is empty). Only the answer's
// text is copied: its tool calls, and everything else the finished run
// saw, stay in that run.
//
// Content over the policy's bound is an error (Reject) or is cut at a
// UTF-8 boundary and followed by CutMarker (Cut). Errors are *bound.Error
// values naming the field, never quoting the content.
func (p Policy) Build(in Input) (Handoff, error) {
	if p.IsZero() {
		return Handoff{}, bound.Missing("handoff.policy")
	}
	if err := bound.Name("handoff.from", in.From); err != nil {
		return Handoff{}, err
	}
	if err := bound.Name("handoff.to", in.To); err != nil {
		return Handoff{}, err
	}
	if err := id.Check("handoff.run_id", string(in.RunID)); err != nil {
		return Handoff{}, err
	}
	if in.Result.Status != engine.Completed || in.Result.Final.IsZero() {
		return Handoff{}, bound.Malformedf("handoff.result", "the run did not complete with a final answer")
	}
	if err := bound.OptionalText("handoff.task", in.Task, bound.MaxMessageBytes); err != nil {
		return Handoff{}, err
	}
	answer := in.Result.Final.Text()
	heading := p.Heading(in.From)

	// The frame is everything but the answer.
	frame := len(heading) + 2 // "<heading>:\n"
	if in.Task != "" {
		frame += len(p.taskHeading) + 2 + len(in.Task) + 2 // "<task heading>:\n<task>\n\n"
	}
	keep, cut := len(answer), false
	if total := frame + len(answer); total > p.maxBytes {
		if p.over == Reject {
			return Handoff{}, &bound.Error{Field: "handoff.content", Rule: bound.TooLarge,
				Limit: p.maxBytes, Got: total, Detail: "the policy rejects content over its bound"}
		}
		room := p.maxBytes - frame - len(CutMarker)
		if room < 0 {
			return Handoff{}, &bound.Error{Field: "handoff.task", Rule: bound.TooLarge,
				Limit: p.maxBytes, Got: frame + len(CutMarker), Detail: "the task and headings alone do not fit the bound"}
		}
		keep, cut = room, true
		for keep > 0 && !utf8.RuneStart(answer[keep]) {
			keep--
		}
	}

	n := frame + keep
	if cut {
		n += len(CutMarker)
	}
	buf := make([]byte, 0, n)
	if in.Task != "" {
		buf = append(buf, p.taskHeading...)
		buf = append(buf, ":\n"...)
		buf = append(buf, in.Task...)
		buf = append(buf, "\n\n"...)
	}
	buf = append(buf, heading...)
	buf = append(buf, ":\n"...)
	buf = append(buf, answer[:keep]...)
	if cut {
		buf = append(buf, CutMarker...)
	}
	sum := sha256.Sum256(buf)
	msg, err := message.User(string(buf))
	if err != nil {
		return Handoff{}, err
	}
	return Handoff{msg: msg, prov: Provenance{
		From: in.From, To: in.To, RunID: in.RunID, LastSeq: in.Result.LastSeq,
		SHA256: sum, Bytes: len(buf), AnswerBytes: len(answer), Cut: cut,
	}}, nil
}
