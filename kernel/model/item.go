package model

import (
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Kind says which member of the Item union is set.
type Kind uint8

const (
	KindTextDelta Kind = iota + 1 // a piece of the answer's text
	KindToolCall                  // one complete tool call
	KindCompleted                 // the terminal success, with usage and metadata
	KindFailed                    // the terminal failure, with a problem
)

func (k Kind) String() string {
	switch k {
	case KindTextDelta:
		return "text_delta"
	case KindToolCall:
		return "tool_call"
	case KindCompleted:
		return "completed"
	case KindFailed:
		return "failed"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Item is one element of a model stream: a strict tagged union held by
// value (K23). Only the constructors below make a non-zero Item, so every
// Item a stream returns already meets its per-item bounds. The zero Item is
// invalid: a stream that returns it is malformed.
type Item struct {
	kind     Kind
	text     string
	call     tool.Call
	usage    Usage
	metadata Metadata
	problem  problem.Problem
}

// TextDelta returns a text item: non-empty valid UTF-8 of at most
// bound.MaxTextDeltaBytes.
func TextDelta(text string) (Item, error) {
	if err := bound.Text("stream.text_delta", text, bound.MaxTextDeltaBytes); err != nil {
		return Item{}, err
	}
	return Item{kind: KindTextDelta, text: text}, nil
}

// ToolCall returns an item carrying one complete tool call. A provider that
// receives call arguments in pieces assembles them before it emits the item.
func ToolCall(c tool.Call) (Item, error) {
	if c.IsZero() {
		return Item{}, bound.Missing("stream.tool_call")
	}
	return Item{kind: KindToolCall, call: c}, nil
}

// Completed returns the terminal success item. Usage and metadata are
// validated values and may be zero.
func Completed(u Usage, md Metadata) Item {
	return Item{kind: KindCompleted, usage: u, metadata: md}
}

// Failed returns the terminal failure item. The problem is what the
// provider can say about the failure without secrets.
func Failed(p problem.Problem) (Item, error) {
	if p.IsZero() {
		return Item{}, bound.Missing("stream.failed.problem")
	}
	return Item{kind: KindFailed, problem: p}, nil
}

// Kind returns which member is set; 0 for the zero Item.
func (it Item) Kind() Kind { return it.kind }

// Text returns the text of a text delta and "" otherwise.
func (it Item) Text() string { return it.text }

// Call returns the call of a tool-call item.
func (it Item) Call() (tool.Call, bool) { return it.call, it.kind == KindToolCall }

// Usage returns the usage of a completed item, zero otherwise.
func (it Item) Usage() Usage { return it.usage }

// Metadata returns the metadata of a completed item, zero otherwise.
func (it Item) Metadata() Metadata { return it.metadata }

// Problem returns the problem of a failed item.
func (it Item) Problem() (problem.Problem, bool) { return it.problem, it.kind == KindFailed }

// IsTerminal reports whether it ends the stream.
func (it Item) IsTerminal() bool { return it.kind == KindCompleted || it.kind == KindFailed }

// IsZero reports whether it is the zero, invalid Item.
func (it Item) IsZero() bool { return it.kind == 0 }
