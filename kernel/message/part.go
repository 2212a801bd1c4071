package message

import (
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Kind says which member of the Part union is set.
type Kind uint8

const (
	KindText       Kind = iota + 1 // text written by a person or the model
	KindToolCall                   // a tool call the model asked for
	KindToolResult                 // the result of a tool call
)

func (k Kind) String() string {
	switch k {
	case KindText:
		return "text"
	case KindToolCall:
		return "tool_call"
	case KindToolResult:
		return "tool_result"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Part is one immutable piece of a message. It is a struct rather than an
// interface so that parts live inline in the message's one slice. The zero
// Part is invalid and is rejected by New.
//
// A call or result is held by pointer, never written after construction:
// text parts, by far the most common, are then a fifth of the size they
// would be with both held inline, and so is every text message.
type Part struct {
	kind   Kind
	text   string
	call   *tool.Call
	result *tool.Result
}

// TextPart returns a text part. The text must be non-empty valid UTF-8 of at
// most bound.MaxMessageBytes.
func TextPart(text string) (Part, error) {
	if err := bound.Text("part.text", text, bound.MaxMessageBytes); err != nil {
		return Part{}, err
	}
	return Part{kind: KindText, text: text}, nil
}

// CallPart returns a part holding a tool call. A tool.Call is already
// validated; New rejects the zero Call.
func CallPart(c tool.Call) Part { return Part{kind: KindToolCall, call: &c} }

// ResultPart returns a part holding a tool result. A tool.Result is already
// validated; New rejects the zero Result.
func ResultPart(r tool.Result) Part { return Part{kind: KindToolResult, result: &r} }

// Kind returns which member is set; 0 for the zero Part.
func (p Part) Kind() Kind { return p.kind }

// Text returns the text of a text part and "" otherwise.
func (p Part) Text() string { return p.text }

// Call returns the tool call of a tool-call part.
func (p Part) Call() (tool.Call, bool) {
	if p.call == nil {
		return tool.Call{}, false
	}
	return *p.call, p.kind == KindToolCall
}

// Result returns the tool result of a tool-result part.
func (p Part) Result() (tool.Result, bool) {
	if p.result == nil {
		return tool.Result{}, false
	}
	return *p.result, p.kind == KindToolResult
}

// IsZero reports whether p is the zero Part.
func (p Part) IsZero() bool { return p.kind == 0 }

// size is what the part contributes to bound.MaxMessageBytes.
func (p Part) size() int {
	switch p.kind {
	case KindText:
		return len(p.text)
	case KindToolCall:
		return len(p.call.ArgumentsString())
	case KindToolResult:
		return len(p.result.Content())
	}
	return 0
}
