package openai

import (
	"strconv"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// requestBody writes the Chat Completions request for req as JSON. The
// client library's params type would do the same through reflection, at
// about 170 allocations for an ordinary history; the provider sends a
// dozen fields, so it writes them itself into one buffer and hands the
// bytes to the library, which still does the rest of the request (auth,
// base URL, headers, middleware). TestRequestBodyMatchesTheLibrary holds
// the two encodings equal as JSON.
func (p *Provider) requestBody(req model.Request) ([]byte, names, error) {
	var ns names
	for d := range req.Tools() {
		if w := wireName(d.Name()); w != d.Name() {
			ns = append(ns, rename{wire: w, kernel: d.Name()})
		}
	}
	if err := checkCollisions(req, ns); err != nil {
		return nil, nil, err
	}

	b := make([]byte, 0, bodySize(req))
	b = append(b, `{"model":`...)
	b = appendString(b, req.Model())
	b = append(b, `,"messages":[`...)
	first := true
	sep := func(b []byte) []byte {
		if first {
			first = false
			return b
		}
		return append(b, ',')
	}
	if sys := req.System(); sys != "" {
		b = sep(b)
		b = append(b, `{"role":"system","content":`...)
		b = appendString(b, sys)
		b = append(b, '}')
	}
	for m := range req.Messages() {
		switch m.Role() {
		case message.RoleUser:
			b = sep(b)
			b = append(b, `{"role":"user","content":`...)
			b = appendText(b, m)
			b = append(b, '}')
		case message.RoleAssistant:
			b = sep(b)
			b = appendAssistant(b, m)
		case message.RoleTool:
			for r := range m.Results() {
				b = sep(b)
				b = append(b, `{"role":"tool","tool_call_id":`...)
				b = appendString(b, string(r.CallID()))
				b = append(b, `,"content":`...)
				b = appendResult(b, r)
				b = append(b, '}')
			}
		}
	}
	b = append(b, `],"stream":true,"stream_options":{"include_usage":true}`...)
	if req.NumTools() > 0 {
		b = append(b, `,"tools":[`...)
		i := 0
		for d := range req.Tools() {
			if i > 0 {
				b = append(b, ',')
			}
			i++
			b = appendFunction(b, d)
		}
		b = append(b, ']')
	}
	if p.s.hasTemperature {
		b = append(b, `,"temperature":`...)
		b = strconv.AppendFloat(b, p.s.temperature, 'f', -1, 64) // 0..2: never an exponent
	}
	if p.s.maxTokens > 0 {
		if p.s.legacyMaxTokens {
			b = append(b, `,"max_tokens":`...)
		} else {
			b = append(b, `,"max_completion_tokens":`...)
		}
		b = strconv.AppendInt(b, p.s.maxTokens, 10)
	}
	return append(b, '}'), ns, nil
}

// bodySize estimates the body's length, so that it is usually written
// into one allocation: the strings' bytes, a sixteenth more for escapes,
// and room for each value's keys.
func bodySize(req model.Request) int {
	n := 128 + len(req.Model()) + len(req.System())
	for m := range req.Messages() {
		n += 40
		for part := range m.Parts() {
			n += len(part.Text())
			if c, ok := part.Call(); ok {
				n += 80 + len(c.ID()) + len(c.Name()) + len(c.ArgumentsString())*9/8
			}
			if r, ok := part.Result(); ok {
				n += 48 + len(r.CallID()) + len(r.Content())
				if pr, ok := r.Problem(); ok {
					n += 16 + len(pr.Code()) + len(pr.Message())
				}
			}
		}
	}
	for d := range req.Tools() {
		n += 64 + len(d.Name()) + len(d.Description()) + len(d.SchemaString())
	}
	return n + n/16
}

func appendAssistant(b []byte, m message.Message) []byte {
	b = append(b, `{"role":"assistant"`...)
	if hasText(m) {
		b = append(b, `,"content":`...)
		b = appendText(b, m)
	}
	if m.NumCalls() > 0 {
		b = append(b, `,"tool_calls":[`...)
		i := 0
		for c := range m.Calls() {
			if i > 0 {
				b = append(b, ',')
			}
			i++
			b = append(b, `{"id":`...)
			b = appendString(b, string(c.ID()))
			b = append(b, `,"type":"function","function":{"name":`...)
			b = appendWireName(b, c.Name())
			b = append(b, `,"arguments":`...)
			b = appendString(b, c.ArgumentsString())
			b = append(b, `}}`...)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendFunction writes a function tool. The schema, already compact JSON,
// is sent byte for byte, in the definition's key order.
func appendFunction(b []byte, d tool.Definition) []byte {
	b = append(b, `{"type":"function","function":{"name":`...)
	b = appendWireName(b, d.Name())
	if desc := d.Description(); desc != "" {
		b = append(b, `,"description":`...)
		b = appendString(b, desc)
	}
	b = append(b, `,"parameters":`...)
	b = append(b, d.SchemaString()...)
	return append(b, `}}`...)
}

func hasText(m message.Message) bool {
	for part := range m.Parts() {
		if part.Kind() == message.KindText && part.Text() != "" {
			return true
		}
	}
	return false
}

// appendText writes m's text parts as one JSON string (m.Text without
// building the concatenation). Each part is valid UTF-8, so escaping the
// parts one by one escapes their concatenation.
func appendText(b []byte, m message.Message) []byte {
	b = append(b, '"')
	for part := range m.Parts() {
		if part.Kind() == message.KindText {
			b = appendEscaped(b, part.Text())
		}
	}
	return append(b, '"')
}

// appendResult writes, as a JSON string, what the model reads for one tool
// result. Chat Completions has no field for a failed call, so a problem is
// written into the text: "error (code): message", a blank line, content.
func appendResult(b []byte, r tool.Result) []byte {
	pr, ok := r.Problem()
	if !ok {
		return appendString(b, r.Content())
	}
	b = append(b, `"error (`...)
	b = appendEscaped(b, pr.Code())
	b = append(b, ')')
	if msg := pr.Message(); msg != "" {
		b = append(b, ": "...)
		b = appendEscaped(b, msg)
	}
	if c := r.Content(); c != "" {
		b = append(b, `\n\n`...)
		b = appendEscaped(b, c)
	}
	return append(b, '"')
}

// appendString writes s as a JSON string in the kernel's canonical form
// (eventlog.AppendString), which encoding/json reads as s.
func appendString(b []byte, s string) []byte { return eventlog.AppendString(b, s) }

// appendEscaped writes s as the inside of a JSON string: the quoted form,
// moved back over its opening quote, so that a string built of several
// pieces (a tool result's text) needs no buffer of its own.
func appendEscaped(b []byte, s string) []byte {
	n := len(b)
	b = eventlog.AppendString(b, s)
	copy(b[n:], b[n+1:len(b)-1])
	return b[:len(b)-2]
}

// appendWireName writes wireName(name) as a JSON string without building
// it.
func appendWireName(b []byte, name string) []byte {
	b = append(b, '"')
	for {
		i := strings.IndexByte(name, '.')
		if i < 0 {
			break
		}
		b = appendEscaped(b, name[:i])
		b = append(b, '_')
		name = name[i+1:]
	}
	b = appendEscaped(b, name)
	return append(b, '"')
}
