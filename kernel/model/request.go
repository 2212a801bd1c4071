package model

import (
	"iter"
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// RequestConfig is the input to NewRequest.
type RequestConfig struct {
	// Operation is the host-issued ID of the model operation this request
	// belongs to; providers may use it for logs and idempotency keys.
	Operation id.Operation
	// Model names the model: 1..bound.MaxNameBytes of printable ASCII
	// without spaces ("gpt-4o-mini", "llama3.1:8b", "meta-llama/Llama-3-8B").
	Model string
	// System is the optional system prompt, at most
	// bound.MaxSystemPromptBytes.
	System string
	// Messages is the history, 1..bound.MaxMessagesPerRequest messages,
	// starting with a user message.
	Messages []message.Message
	// Tools are the definitions the model may call: at most
	// bound.MaxToolsPerPlan, names unique.
	Tools []tool.Definition
	// Metadata is optional.
	Metadata Metadata
}

// Request is an immutable model request.
type Request struct {
	operation id.Operation
	model     string
	system    string
	messages  []message.Message // never handed out
	tools     []tool.Definition // never handed out
	metadata  Metadata
}

// NewRequest validates cfg and returns a Request holding copies of its
// slices (the messages and definitions themselves are immutable values).
//
// Besides the bounds it checks that the history is well formed: the first
// message is from the user, and every tool message answers calls of the
// nearest assistant message before it, each call at most once.
func NewRequest(cfg RequestConfig) (Request, error) {
	if err := id.Check("request.operation", string(cfg.Operation)); err != nil {
		return Request{}, err
	}
	if err := checkModelName(cfg.Model); err != nil {
		return Request{}, err
	}
	if err := bound.OptionalText("request.system", cfg.System, bound.MaxSystemPromptBytes); err != nil {
		return Request{}, err
	}
	if err := checkHistory(cfg.Messages); err != nil {
		return Request{}, err
	}
	if err := checkTools(cfg.Tools); err != nil {
		return Request{}, err
	}
	r := Request{
		operation: cfg.Operation,
		model:     cfg.Model,
		system:    cfg.System,
		messages:  append([]message.Message(nil), cfg.Messages...),
		metadata:  cfg.Metadata,
	}
	if len(cfg.Tools) > 0 {
		r.tools = append([]tool.Definition(nil), cfg.Tools...)
	}
	return r, nil
}

// checkModelName allows a looser alphabet than bound.Name because model
// names carry versions, tags and organisations.
func checkModelName(s string) error { return CheckModelName("request.model", s) }

// CheckModelName validates a model name for field: 1..bound.MaxNameBytes of
// printable ASCII without spaces ("gpt-4o-mini", "llama3.1:8b",
// "meta-llama/Llama-3-8B").
func CheckModelName(field, s string) error {
	if s == "" {
		return bound.Missing(field)
	}
	if err := bound.Bytes(field, len(s), bound.MaxNameBytes); err != nil {
		return err
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return bound.Malformedf(field, "only printable ASCII without spaces is allowed")
		}
	}
	return nil
}

func checkHistory(msgs []message.Message) error {
	if len(msgs) == 0 {
		return bound.Missing("request.messages")
	}
	if err := bound.Count("request.messages", len(msgs), bound.MaxMessagesPerRequest); err != nil {
		return err
	}
	answering := -1 // index of the assistant message tool messages answer
	for i, m := range msgs {
		if i == 0 && m.Role() != message.RoleUser && !m.IsZero() {
			return bound.Conflicting(messageField(0, ".role"), "the first message must be from the user")
		}
		switch m.Role() {
		case 0:
			return bound.Missing(messageField(i, ""))
		case message.RoleUser:
			answering = -1
		case message.RoleAssistant:
			answering = i
		case message.RoleTool:
			if answering < 0 {
				return bound.Conflicting(messageField(i, ""), "a tool message must follow an assistant message")
			}
			if err := checkAnswers(msgs[answering:i], m, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkAnswers checks that every result of m (message i) answers a call of
// span[0], the assistant message, and that no earlier tool message in span
// answered it already. The scans are linear in small, bounded slices and
// allocate nothing.
func checkAnswers(span []message.Message, m message.Message, i int) error {
	j := 0
	for r := range m.Results() {
		asked := false
		for c := range span[0].Calls() {
			if c.ID() == r.CallID() {
				asked = true
				break
			}
		}
		if !asked {
			return bound.Conflicting(messageField(i, ".parts["+strconv.Itoa(j)+"].tool_result.call_id"),
				"answers no call of the preceding assistant message")
		}
		for _, prev := range span[1:] {
			for pr := range prev.Results() {
				if pr.CallID() == r.CallID() {
					return bound.Conflicting(messageField(i, ".parts["+strconv.Itoa(j)+"].tool_result.call_id"),
						"call already answered")
				}
			}
		}
		j++
	}
	return nil
}

func messageField(i int, suffix string) string {
	return "request.messages[" + strconv.Itoa(i) + "]" + suffix
}

func checkTools(defs []tool.Definition) error {
	if err := bound.Count("request.tools", len(defs), bound.MaxToolsPerPlan); err != nil {
		return err
	}
	for i, d := range defs {
		if d.IsZero() {
			return bound.Missing("request.tools[" + strconv.Itoa(i) + "]")
		}
		for _, e := range defs[:i] {
			if e.Name() == d.Name() {
				return bound.Malformedf("request.tools["+strconv.Itoa(i)+"].name", "duplicate tool name")
			}
		}
	}
	return nil
}

// Operation returns the host-issued operation ID.
func (r Request) Operation() id.Operation { return r.operation }

// Model returns the model name.
func (r Request) Model() string { return r.model }

// System returns the system prompt, possibly empty.
func (r Request) System() string { return r.system }

// Messages yields the history in order.
func (r Request) Messages() iter.Seq[message.Message] {
	return func(yield func(message.Message) bool) {
		for _, m := range r.messages {
			if !yield(m) {
				return
			}
		}
	}
}

// NumMessages returns the length of the history.
func (r Request) NumMessages() int { return len(r.messages) }

// Tools yields the tool definitions in the order given.
func (r Request) Tools() iter.Seq[tool.Definition] {
	return func(yield func(tool.Definition) bool) {
		for _, d := range r.tools {
			if !yield(d) {
				return
			}
		}
	}
}

// NumTools returns the number of tool definitions.
func (r Request) NumTools() int { return len(r.tools) }

// Metadata returns the request metadata, zero if none.
func (r Request) Metadata() Metadata { return r.metadata }

// IsZero reports whether r is the zero Request.
func (r Request) IsZero() bool { return r.operation == "" }
