package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// Limits of a script, on top of the kernel's per-operation bounds.
const (
	MaxSteps       = 256     // steps in one script
	MaxMatchBytes  = 1 << 10 // one step's Match rule
	MaxScriptBytes = 4 << 20 // the JSON DecodeScript accepts
	MaxDeltas      = 8       // word-boundary text deltas per step, before cutting long pieces
)

// Script is what one scripted model answers, step by step. It is a plain
// value: build it in Go, decode it from JSON with DecodeScript, or fill it
// from any other spec format. NewProvider validates and copies it.
type Script struct {
	Steps []Step `json:"steps"`
}

// Step is the answer to one model operation.
type Step struct {
	// Match, when set, restricts the step to inputs (last user messages)
	// it accepts; see the package documentation for the grammar.
	Match string `json:"match,omitempty"`
	// Text is the answer text, at most bound.MaxTextPerOperation bytes.
	Text string `json:"text,omitempty"`
	// Calls are the tool calls, at most bound.MaxToolCallsPerOperation.
	// A step has text, calls or both.
	Calls []CallSpec `json:"calls,omitempty"`
	// Usage is reported by the step's Completed item.
	Usage Usage `json:"usage,omitzero"`
}

// CallSpec is one scripted tool call.
type CallSpec struct {
	// Name is the tool name (bound.Name syntax), e.g. "fs.write".
	Name string `json:"name"`
	// Arguments is a JSON object of at most bound.MaxToolArgumentsBytes;
	// empty means {}.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Usage is the token usage a step reports. Counts must not be negative.
type Usage struct {
	Input  int64 `json:"input,omitempty"`
	Output int64 `json:"output,omitempty"`
}

// Validate checks s as NewProvider does and returns the first *bound.Error,
// whose Field names the offending place ("script.steps[2].calls[0].name").
func (s Script) Validate() error {
	_, err := compile(s)
	return err
}

// ToolNames returns the distinct tool names the script calls, sorted, so a
// host can check that it wired every tool the script needs.
func (s Script) ToolNames() []string {
	var names []string
	for _, st := range s.Steps {
		for _, c := range st.Calls {
			names = append(names, c.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// DecodeScript decodes a JSON script strictly (unknown fields, trailing
// data and inputs over MaxScriptBytes are errors) and validates it. Every
// error is a *bound.Error.
func DecodeScript(data []byte) (Script, error) {
	var s Script
	if err := decodeStrict(data, &s, "script"); err != nil {
		return Script{}, err
	}
	if err := s.Validate(); err != nil {
		return Script{}, err
	}
	return s, nil
}

// decodeStrict decodes one JSON value into v. Error details name the kind
// of mistake, never the input.
func decodeStrict(data []byte, v any, field string) error {
	if err := bound.Bytes(field, len(data), MaxScriptBytes); err != nil {
		return err
	}
	if !utf8.Valid(data) {
		return bound.Malformedf(field, "not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bound.Malformedf(field, jsonReason(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return bound.Malformedf(field, "trailing data after the JSON value")
	}
	return nil
}

// jsonReason describes a decoding error without quoting the input.
// encoding/json names unknown fields and offending types, which are part of
// the schema, not of the value.
func jsonReason(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return "wrong JSON type for " + strconv.Quote(te.Field) + ": want " + te.Type.String()
	case errors.As(err, &se):
		return "JSON syntax error at offset " + strconv.FormatInt(se.Offset, 10)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// The key is named only when it looks like a field name, so a
		// value pasted in the wrong place is never echoed.
		key, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		if bound.Name("key", key) == nil {
			return "unknown field " + strconv.Quote(key)
		}
		return "unknown field"
	}
	return "not a valid script"
}

// compiled is a validated script: matchers compiled, deltas split, call
// arguments compacted.
type compiled struct {
	steps []step
}

type step struct {
	match  matcher
	deltas []string
	calls  []callSpec
	usage  Usage
}

type callSpec struct {
	name string
	args []byte // compact JSON object
}

func compile(s Script) (compiled, error) {
	if len(s.Steps) == 0 {
		return compiled{}, bound.Missing("script.steps")
	}
	if err := bound.Count("script.steps", len(s.Steps), MaxSteps); err != nil {
		return compiled{}, err
	}
	c := compiled{steps: make([]step, len(s.Steps))}
	for i, st := range s.Steps {
		cs, err := compileStep("script.steps["+strconv.Itoa(i)+"]", st)
		if err != nil {
			return compiled{}, err
		}
		c.steps[i] = cs
	}
	return c, nil
}

func compileStep(field string, st Step) (step, error) {
	m, err := compileMatch(field+".match", st.Match)
	if err != nil {
		return step{}, err
	}
	if st.Text == "" && len(st.Calls) == 0 {
		return step{}, bound.Missing(field + ".text")
	}
	if err := bound.OptionalText(field+".text", st.Text, bound.MaxTextPerOperation); err != nil {
		return step{}, err
	}
	if err := bound.Count(field+".calls", len(st.Calls), bound.MaxToolCallsPerOperation); err != nil {
		return step{}, err
	}
	if st.Usage.Input < 0 {
		return step{}, bound.Malformedf(field+".usage.input", "must not be negative")
	}
	if st.Usage.Output < 0 {
		return step{}, bound.Malformedf(field+".usage.output", "must not be negative")
	}
	out := step{match: m, deltas: splitText(st.Text), usage: st.Usage}
	size := len(st.Text)
	for j, c := range st.Calls {
		cf := field + ".calls[" + strconv.Itoa(j) + "]"
		cs, err := compileCall(cf, c)
		if err != nil {
			return step{}, err
		}
		size += len(cs.args)
		out.calls = append(out.calls, cs)
	}
	// The assistant message holds the text and every call's arguments.
	if err := bound.Bytes(field, size, bound.MaxMessageBytes); err != nil {
		return step{}, err
	}
	return out, nil
}

func compileCall(field string, c CallSpec) (callSpec, error) {
	if err := bound.Name(field+".name", c.Name); err != nil {
		return callSpec{}, err
	}
	args := []byte(c.Arguments)
	if len(bytes.TrimSpace(args)) == 0 {
		return callSpec{name: c.Name, args: []byte("{}")}, nil
	}
	af := field + ".arguments"
	if err := bound.Bytes(af, len(args), bound.MaxToolArgumentsBytes); err != nil {
		return callSpec{}, err
	}
	if !utf8.Valid(args) {
		return callSpec{}, bound.Malformedf(af, "not valid UTF-8")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, args); err != nil {
		return callSpec{}, bound.Malformedf(af, "not valid JSON")
	}
	if buf.Bytes()[0] != '{' {
		return callSpec{}, bound.Malformedf(af, "must be a JSON object")
	}
	return callSpec{name: c.Name, args: buf.Bytes()}, nil
}

// matcher is a compiled Match rule. The zero matcher accepts everything.
type matcher struct {
	negate bool
	substr string
	re     *regexp.Regexp
	set    bool
}

func (m matcher) accepts(input string) bool {
	if !m.set {
		return true
	}
	var ok bool
	if m.re != nil {
		ok = m.re.MatchString(input)
	} else {
		ok = strings.Contains(input, m.substr)
	}
	return ok != m.negate
}

func compileMatch(field, s string) (matcher, error) {
	if s == "" {
		return matcher{}, nil
	}
	if err := bound.OptionalText(field, s, MaxMatchBytes); err != nil {
		return matcher{}, err
	}
	m := matcher{set: true}
	if rest, ok := strings.CutPrefix(s, "not:"); ok {
		if strings.HasPrefix(rest, "not:") {
			return matcher{}, bound.Malformedf(field, `"not:" cannot be nested`)
		}
		m.negate, s = true, rest
		if s == "" {
			return matcher{}, bound.Malformedf(field, `"not:" needs a rule`)
		}
	}
	if expr, ok := strings.CutPrefix(s, "re:"); ok {
		if expr == "" {
			return matcher{}, bound.Malformedf(field, `"re:" needs an expression`)
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			// The syntax error's code names the mistake; its Expr field
			// would quote the rule, so it is left out.
			reason := "regular expression does not compile"
			var se *syntax.Error
			if errors.As(err, &se) {
				reason += ": " + string(se.Code)
			}
			return matcher{}, bound.Malformedf(field, reason)
		}
		m.re = re
		return m, nil
	}
	if text, ok := strings.CutPrefix(s, "text:"); ok {
		if text == "" {
			return matcher{}, bound.Malformedf(field, `"text:" needs a text`)
		}
		s = text
	}
	m.substr = s
	return m, nil
}

// splitText cuts s into at most MaxDeltas pieces at word boundaries (each
// piece keeps the whitespace after its words), then cuts any piece longer
// than bound.MaxTextDeltaBytes at rune boundaries. The pieces concatenate
// to s.
func splitText(s string) []string {
	if s == "" {
		return nil
	}
	words := splitWords(s)
	pieces := words
	if len(words) > MaxDeltas {
		pieces = make([]string, 0, MaxDeltas)
		start := 0 // byte offset of the current group in s
		off := 0
		for g := range MaxDeltas {
			end := (g + 1) * len(words) / MaxDeltas
			for _, w := range words[g*len(words)/MaxDeltas : end] {
				off += len(w)
			}
			pieces = append(pieces, s[start:off])
			start = off
		}
	}
	var out []string
	for _, p := range pieces {
		for len(p) > bound.MaxTextDeltaBytes {
			cut := bound.MaxTextDeltaBytes
			for cut > 0 && !utf8.RuneStart(p[cut]) {
				cut--
			}
			out = append(out, p[:cut])
			p = p[cut:]
		}
		out = append(out, p)
	}
	return out
}

// splitWords splits s before every word that follows whitespace: "  a b\n"
// gives ["  a ", "b\n"].
func splitWords(s string) []string {
	var out []string
	start := 0
	seenWord, inSpace := false, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if !space && inSpace && seenWord {
			out = append(out, s[start:i])
			start = i
		}
		if !space {
			seenWord = true
		}
		inSpace = space
	}
	return append(out, s[start:])
}
