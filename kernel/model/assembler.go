package model

import (
	"errors"
	"strconv"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Violation says how a stream broke its contract.
type Violation uint8

const (
	// Malformed: the stream broke the union's rules (zero item, item
	// after the terminal, missing terminal, duplicate call ID, empty
	// completion).
	Malformed Violation = iota + 1
	// Oversized: the stream exceeded an aggregate limit.
	Oversized
)

func (v Violation) String() string {
	switch v {
	case Malformed:
		return "malformed"
	case Oversized:
		return "oversized"
	}
	return "violation(" + strconv.Itoa(int(v)) + ")"
}

// StreamError is the typed error for a stream that broke its contract
// (K23). It fails the model operation. Item is the zero-based index of the
// offending item, or the number of items received when the stream ended
// without a terminal. Err, when set, is the *bound.Error naming the field
// and limit, so errors.Is(err, bound.ErrExceeded) holds for Oversized.
// Only an Assembler creates StreamErrors.
type StreamError struct {
	Violation Violation
	Item      int
	Detail    string
	Err       error
}

func (e *StreamError) Error() string {
	s := "model stream: " + e.Violation.String() + " at item " + strconv.Itoa(e.Item)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the *bound.Error behind the violation, if any.
func (e *StreamError) Unwrap() error { return e.Err }

// Response is a completed model operation: the assistant message (the
// streamed text as one text part, then the calls in stream order), the usage
// and the metadata.
type Response struct {
	message  message.Message
	usage    Usage
	metadata Metadata
}

// Message returns the assistant message.
func (r Response) Message() message.Message { return r.message }

// Usage returns the usage the provider reported.
func (r Response) Usage() Usage { return r.usage }

// Metadata returns the provider metadata, zero if none.
func (r Response) Metadata() Metadata { return r.metadata }

// minTextBuffer is the first buffer of a multi-delta text: large enough
// that a short answer streamed token by token grows it once.
const minTextBuffer = 512

// Assembler holds one stream to the rules of K23 while its items are
// consumed, and assembles the response. Feed every item Recv returns to Add,
// and call End when Recv returns io.EOF. The first violation is sticky:
// every later call returns it.
//
// The zero Assembler is ready to use. It is not safe for concurrent use and
// must not be copied after first use. A text-only stream of one delta costs
// one allocation (the message's parts).
type Assembler struct {
	n        int // items offered, valid or not
	terminal Kind
	err      *StreamError

	// Text: the first delta is kept as is; the builder starts at the second.
	first   string
	text    strings.Builder
	textLen int
	argsLen int
	calls   []tool.Call

	response Response
	problem  problem.Problem
}

// Add checks one item and accounts for it. It returns a *StreamError if the
// item breaks the stream's rules.
func (a *Assembler) Add(it Item) error {
	i := a.n
	a.n++
	if a.err != nil {
		return a.err
	}
	if a.terminal != 0 {
		return a.fail(Malformed, i, "item after the terminal item", nil)
	}
	switch it.kind {
	case KindTextDelta:
		return a.addText(i, it.text)
	case KindToolCall:
		return a.addCall(i, it.call)
	case KindCompleted:
		return a.complete(i, it)
	case KindFailed:
		a.terminal = KindFailed
		a.problem = it.problem
		return nil
	case 0:
		return a.fail(Malformed, i, "zero item", bound.Missing("stream.item"))
	}
	return a.fail(Malformed, i, "unknown item kind", nil)
}

func (a *Assembler) addText(i int, s string) error {
	// Items are only built by TextDelta, so the per-item bound holds; the
	// check stays because it is one comparison.
	if err := bound.Bytes("stream.text_delta", len(s), bound.MaxTextDeltaBytes); err != nil {
		return a.fail(Oversized, i, "", err)
	}
	total := a.textLen + len(s)
	if err := bound.Bytes("stream.text", total, bound.MaxTextPerOperation); err != nil {
		return a.fail(Oversized, i, "", err)
	}
	if err := bound.Bytes("stream.message", total+a.argsLen, bound.MaxMessageBytes); err != nil {
		return a.fail(Oversized, i, "", err)
	}
	switch {
	case a.textLen == 0:
		a.first = s
	case a.first != "":
		// Grow once for many small deltas rather than doubling from
		// the first two.
		a.text.Grow(min(max(minTextBuffer, 2*total), bound.MaxTextPerOperation))
		a.text.WriteString(a.first)
		a.first = ""
		fallthrough
	default:
		a.text.WriteString(s)
	}
	a.textLen = total
	return nil
}

func (a *Assembler) addCall(i int, c tool.Call) error {
	if c.IsZero() {
		return a.fail(Malformed, i, "zero tool call", bound.Missing("stream.tool_call"))
	}
	if err := bound.Count("stream.tool_calls", len(a.calls)+1, bound.MaxToolCallsPerOperation); err != nil {
		return a.fail(Oversized, i, "", err)
	}
	for _, prev := range a.calls {
		if prev.ID() == c.ID() {
			return a.fail(Malformed, i, "", bound.Malformedf(
				"stream.tool_calls["+strconv.Itoa(len(a.calls))+"].id", "duplicate call ID"))
		}
	}
	args := a.argsLen + len(c.ArgumentsString())
	if err := bound.Bytes("stream.message", a.textLen+args, bound.MaxMessageBytes); err != nil {
		return a.fail(Oversized, i, "", err)
	}
	if a.calls == nil {
		a.calls = make([]tool.Call, 0, 4)
	}
	a.calls = append(a.calls, c)
	a.argsLen = args
	return nil
}

func (a *Assembler) complete(i int, it Item) error {
	if a.textLen == 0 && len(a.calls) == 0 {
		return a.fail(Malformed, i, "completed without text or tool calls", nil)
	}
	text := a.first
	if text == "" {
		text = a.text.String()
	}
	msg, err := message.Assistant(text, a.calls...)
	if err != nil {
		v := Malformed
		if errors.Is(err, bound.ErrExceeded) {
			v = Oversized
		}
		return a.fail(v, i, "", err)
	}
	a.terminal = KindCompleted
	a.response = Response{message: msg, usage: it.usage, metadata: it.metadata}
	return nil
}

func (a *Assembler) fail(v Violation, i int, detail string, err error) error {
	a.err = &StreamError{Violation: v, Item: i, Detail: detail, Err: err}
	return a.err
}

// End records that the stream returned io.EOF. It returns a *StreamError
// if no terminal item came first, or the earlier violation.
func (a *Assembler) End() error {
	if a.err != nil {
		return a.err
	}
	if a.terminal == 0 {
		return a.fail(Malformed, a.n, "stream ended without a completed or failed item", nil)
	}
	return nil
}

// Observed reports whether the stream produced anything, valid or not. A
// Failed item counts: such a stream is never retried as if nothing had
// happened.
func (a *Assembler) Observed() bool { return a.n > 0 }

// Terminal returns KindCompleted or KindFailed once a terminal item was
// accepted, else 0.
func (a *Assembler) Terminal() Kind { return a.terminal }

// Response returns the completed response.
func (a *Assembler) Response() (Response, bool) {
	return a.response, a.terminal == KindCompleted
}

// Problem returns the problem of the Failed item.
func (a *Assembler) Problem() (problem.Problem, bool) {
	return a.problem, a.terminal == KindFailed
}

// Err returns the first violation, or nil.
func (a *Assembler) Err() error {
	if a.err == nil {
		return nil
	}
	return a.err
}
