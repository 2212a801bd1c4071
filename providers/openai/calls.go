package openai

import (
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// partialCall is one tool call while its fragments arrive.
type partialCall struct {
	index int64
	id    string
	name  string
	args  []byte
}

// fragment adds one tool-call fragment. Fragments are keyed by index; a
// fragment that brings a different ID for an index already in use starts a
// new call, for servers that number every call 0.
func (s *stream) fragment(f *callFragment) {
	c := s.slot(f.index, f.id)
	if c == nil {
		return
	}
	if len(f.id) > 0 && c.id == "" {
		c.id = string(f.id)
	}
	// The name normally arrives once; some servers repeat it with every
	// fragment, and a name split over fragments is joined.
	if n := f.name; len(n) > 0 && string(n) != c.name {
		if err := bound.Bytes("stream.tool_calls.name", len(c.name)+len(n), bound.MaxNameBytes); err != nil {
			s.fail(newProblem(CodeInvalidToolCall, boundMessage("a tool call is invalid", err)))
			return
		}
		c.name += string(n)
	}
	a := f.args
	if len(a) == 0 {
		return
	}
	if err := bound.Bytes("tool_call.arguments", len(c.args)+len(a), bound.MaxToolArgumentsBytes); err != nil {
		s.oversized(err)
		return
	}
	if err := bound.Bytes("stream.message", s.textLen+s.argsLen+len(a), bound.MaxMessageBytes); err != nil {
		s.oversized(err)
		return
	}
	c.args = append(c.args, a...)
	s.argsLen += len(a)
}

// slot returns the call a fragment belongs to, starting a new one when
// needed; nil when the stream has failed.
func (s *stream) slot(index int64, callID []byte) *partialCall {
	for i := len(s.calls) - 1; i >= 0; i-- {
		c := &s.calls[i]
		if c.index != index {
			continue
		}
		if len(callID) == 0 || c.id == "" || c.id == string(callID) {
			return c
		}
		break // same index, another ID: a new call
	}
	if err := bound.Count("stream.tool_calls", s.emitted+len(s.calls)+1, bound.MaxToolCallsPerOperation); err != nil {
		s.oversized(err)
		return nil
	}
	if s.calls == nil {
		s.calls = make([]partialCall, 0, 4)
	}
	s.calls = append(s.calls, partialCall{index: index})
	return &s.calls[len(s.calls)-1]
}

// flushCalls emits the assembled calls in the order they began.
func (s *stream) flushCalls() {
	for i := range s.calls {
		c := &s.calls[i]
		r := &s.p.s.redact
		c.id, c.name, c.args = r.redact(c.id), r.redact(c.name), []byte(r.redact(string(c.args)))
		call, err := tool.NewCall(s.callID(c, s.emitted), s.names.kernelName(c.name), c.args)
		if err != nil {
			msg := boundMessage("a tool call is invalid", err)
			if s.finish == "length" {
				msg += " (the model reached its output token limit)"
			}
			s.fail(newProblem(CodeInvalidToolCall, msg))
			return
		}
		for j := len(s.pending) - 1; j >= 0; j-- {
			if prev, ok := s.pending[j].Call(); ok && prev.ID() == call.ID() {
				s.fail(newProblem(CodeInvalidToolCall, "two tool calls share an ID"))
				return
			}
		}
		it, err := model.ToolCall(call)
		if err != nil {
			s.fail(newProblem(CodeInvalidToolCall, boundMessage("a tool call is invalid", err)))
			return
		}
		s.pending = append(s.pending, it)
		s.emitted++
	}
	s.calls = s.calls[:0]
}

// callID is the server's ID when the kernel accepts it, else one derived
// from the operation ("op-7-call-1"): the IDs only have to match within
// the history this run sends back, and some servers send none.
func (s *stream) callID(c *partialCall, n int) id.Call {
	if c.id != "" && id.Check("tool_call.id", c.id) == nil {
		return id.Call(c.id)
	}
	suffix := "-call-" + strconv.Itoa(n+1)
	if s.op != "" && len(s.op)+len(suffix) <= bound.MaxIDBytes {
		return id.Call(s.op + suffix)
	}
	return id.Call("call-" + strconv.Itoa(n+1))
}
