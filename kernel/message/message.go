package message

import (
	"iter"
	"strconv"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Role says who wrote a message.
type Role uint8

const (
	RoleUser      Role = iota + 1 // a person or client; text only
	RoleAssistant                 // the model; text and tool calls
	RoleTool                      // tool results answering the model's calls
)

func (r Role) String() string {
	switch r {
	case RoleUser:
		return "user"
	case RoleAssistant:
		return "assistant"
	case RoleTool:
		return "tool"
	}
	return "role(" + strconv.Itoa(int(r)) + ")"
}

// ParseRole returns the Role whose String is s, for decoders of outside
// bytes (snapshots).
func ParseRole(s string) (Role, error) {
	switch s {
	case "user":
		return RoleUser, nil
	case "assistant":
		return RoleAssistant, nil
	case "tool":
		return RoleTool, nil
	case "":
		return 0, bound.Missing("message.role")
	}
	return 0, bound.Malformedf("message.role", "unknown role")
}

// Message is an immutable role plus 1..bound.MaxPartsPerMessage parts. The
// zero Message is "no message" and is rejected wherever a message is
// required.
type Message struct {
	role  Role
	parts []Part // never handed out, never written after construction
}

// New validates and returns a message with a copy of parts. It checks the
// part count, the total size of text, call arguments and result content
// (bound.MaxMessageBytes), which parts the role may hold (user: text;
// assistant: text and tool calls; tool: tool results) and that no call ID
// appears twice.
func New(role Role, parts ...Part) (Message, error) {
	if err := check(role, parts); err != nil {
		return Message{}, err
	}
	return Message{role: role, parts: append([]Part(nil), parts...)}, nil
}

// User returns a user message holding one text part.
func User(text string) (Message, error) {
	if err := bound.Text("message.parts[0].text", text, bound.MaxMessageBytes); err != nil {
		return Message{}, err
	}
	return Message{role: RoleUser, parts: []Part{{kind: KindText, text: text}}}, nil
}

// Assistant returns an assistant message: one text part unless text is
// empty, followed by one part per call in order.
func Assistant(text string, calls ...tool.Call) (Message, error) {
	n := len(calls)
	if text != "" {
		n++
	}
	parts := make([]Part, 0, n)
	if text != "" {
		if err := bound.Text("message.parts[0].text", text, bound.MaxMessageBytes); err != nil {
			return Message{}, err
		}
		parts = append(parts, Part{kind: KindText, text: text})
	}
	// One copy of the calls backs every call part.
	own := append([]tool.Call(nil), calls...)
	for i := range own {
		parts = append(parts, Part{kind: KindToolCall, call: &own[i]})
	}
	if err := check(RoleAssistant, parts); err != nil {
		return Message{}, err
	}
	return Message{role: RoleAssistant, parts: parts}, nil
}

// Results returns a tool message holding one part per result in order.
func Results(results ...tool.Result) (Message, error) {
	parts := make([]Part, len(results))
	// One copy of the results backs every result part.
	own := append([]tool.Result(nil), results...)
	for i := range own {
		parts[i] = Part{kind: KindToolResult, result: &own[i]}
	}
	if err := check(RoleTool, parts); err != nil {
		return Message{}, err
	}
	return Message{role: RoleTool, parts: parts}, nil
}

func check(role Role, parts []Part) error {
	switch role {
	case RoleUser, RoleAssistant, RoleTool:
	case 0:
		return bound.Missing("message.role")
	default:
		return bound.Malformedf("message.role", "unknown role")
	}
	if len(parts) == 0 {
		return bound.Missing("message.parts")
	}
	if err := bound.Count("message.parts", len(parts), bound.MaxPartsPerMessage); err != nil {
		return err
	}
	total := 0
	for i, p := range parts {
		if err := checkPart(role, parts[:i], p, i); err != nil {
			return err
		}
		total += p.size()
	}
	return bound.Bytes("message", total, bound.MaxMessageBytes)
}

// checkPart checks part i against the role and the parts before it. The
// duplicate scan is quadratic, which is cheaper than a map for at most
// bound.MaxPartsPerMessage parts and allocates nothing.
func checkPart(role Role, before []Part, p Part, i int) error {
	switch p.kind {
	case 0:
		return bound.Missing(partField(i, ""))
	case KindText:
		if role == RoleTool {
			return bound.Conflicting(partField(i, ""), "a tool message holds only tool results")
		}
	case KindToolCall:
		if role != RoleAssistant {
			return bound.Conflicting(partField(i, ""), "only an assistant message holds tool calls")
		}
		if p.call == nil || p.call.IsZero() {
			return bound.Missing(partField(i, ".tool_call"))
		}
		for _, q := range before {
			if q.kind == KindToolCall && q.call.ID() == p.call.ID() {
				return bound.Malformedf(partField(i, ".tool_call.id"), "duplicate call ID")
			}
		}
	case KindToolResult:
		if role != RoleTool {
			return bound.Conflicting(partField(i, ""), "only a tool message holds tool results")
		}
		if p.result == nil || p.result.IsZero() {
			return bound.Missing(partField(i, ".tool_result"))
		}
		for _, q := range before {
			if q.kind == KindToolResult && q.result.CallID() == p.result.CallID() {
				return bound.Malformedf(partField(i, ".tool_result.call_id"), "duplicate call ID")
			}
		}
	default:
		return bound.Malformedf(partField(i, ""), "unknown part kind")
	}
	return nil
}

// partField is built only on the error path.
func partField(i int, suffix string) string {
	return "message.parts[" + strconv.Itoa(i) + "]" + suffix
}

// Role returns who wrote the message.
func (m Message) Role() Role { return m.role }

// Len returns the number of parts.
func (m Message) Len() int { return len(m.parts) }

// Part returns part i. Like a slice index, it panics if i is out of range.
func (m Message) Part(i int) Part { return m.parts[i] }

// Parts yields the parts in order.
func (m Message) Parts() iter.Seq[Part] {
	return func(yield func(Part) bool) {
		for _, p := range m.parts {
			if !yield(p) {
				return
			}
		}
	}
}

// Text returns the text parts concatenated in order, without separators
// (the parts of one message are one text that may arrive in pieces).
func (m Message) Text() string {
	first, n, size := -1, 0, 0
	for i, p := range m.parts {
		if p.kind == KindText {
			if first < 0 {
				first = i
			}
			n++
			size += len(p.text)
		}
	}
	switch n {
	case 0:
		return ""
	case 1:
		return m.parts[first].text
	}
	var b strings.Builder
	b.Grow(size)
	for _, p := range m.parts {
		if p.kind == KindText {
			b.WriteString(p.text)
		}
	}
	return b.String()
}

// Calls yields the tool calls in order.
func (m Message) Calls() iter.Seq[tool.Call] {
	return func(yield func(tool.Call) bool) {
		for _, p := range m.parts {
			if p.kind == KindToolCall && !yield(*p.call) {
				return
			}
		}
	}
}

// NumCalls returns the number of tool calls; an assistant message without
// calls is a final answer.
func (m Message) NumCalls() int {
	n := 0
	for _, p := range m.parts {
		if p.kind == KindToolCall {
			n++
		}
	}
	return n
}

// Results yields the tool results in order.
func (m Message) Results() iter.Seq[tool.Result] {
	return func(yield func(tool.Result) bool) {
		for _, p := range m.parts {
			if p.kind == KindToolResult && !yield(*p.result) {
				return
			}
		}
	}
}

// IsZero reports whether m is the zero Message.
func (m Message) IsZero() bool { return m.role == 0 }
