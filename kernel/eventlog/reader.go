package eventlog

import (
	"encoding/json"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// ObjectReader reads one JSON object written by Object, field by field in
// the same fixed order. It accepts no whitespace, no unknown, missing or
// reordered fields and no trailing bytes. It is lenient only about string
// escapes, so a caller that needs canonical bytes re-encodes the decoded
// value and compares.
//
// The first error sticks: later calls return zero values and Close returns
// it. Errors are *bound.Error values naming the field path and never quote
// the input.
type ObjectReader struct {
	b    []byte
	i    int
	path string // field path of the innermost open object
	err  error
	more bool
	open int
}

// ReadObject starts reading the object in b; field names errors ("payload").
func ReadObject(field string, b []byte) ObjectReader {
	r := ObjectReader{b: b, path: field, open: 1}
	if len(b) == 0 || b[0] != '{' {
		r.fail(field, "expected a JSON object")
		return r
	}
	r.i = 1
	return r
}

func (r *ObjectReader) fail(field, reason string) {
	if r.err == nil {
		r.err = bound.Malformedf(field, reason)
	}
}

func (r *ObjectReader) field(name string) string { return r.path + "." + name }

// hasKey reports whether the next field is name, without consuming it.
func (r *ObjectReader) hasKey(name string) bool {
	i := r.i
	if r.more {
		if i >= len(r.b) || r.b[i] != ',' {
			return false
		}
		i++
	}
	return len(r.b)-i >= len(name)+3 && r.b[i] == '"' &&
		string(r.b[i+1:i+1+len(name)]) == name &&
		r.b[i+1+len(name)] == '"' && r.b[i+2+len(name)] == ':'
}

// key consumes the field name or records an error.
func (r *ObjectReader) key(name string) bool {
	if r.err != nil {
		return false
	}
	if !r.hasKey(name) {
		r.fail(r.field(name), "missing, misplaced or unexpected field")
		return false
	}
	if r.more {
		r.i++
	}
	r.i += len(name) + 3
	r.more = true
	return true
}

// String reads a string field.
func (r *ObjectReader) String(name string) string {
	if !r.key(name) {
		return ""
	}
	return r.str(r.field(name))
}

// OptionalString reads a string field that may be absent.
func (r *ObjectReader) OptionalString(name string) string {
	if r.err != nil || !r.hasKey(name) {
		return ""
	}
	return r.String(name)
}

// Int reads an integer field.
func (r *ObjectReader) Int(name string) int64 {
	if !r.key(name) {
		return 0
	}
	neg := r.i < len(r.b) && r.b[r.i] == '-'
	if neg {
		r.i++
	}
	u, ok := r.digits(r.field(name))
	switch {
	case !ok:
		return 0
	case !neg && u <= math.MaxInt64:
		return int64(u)
	case neg && u > 0 && u <= 1<<63:
		return int64(-u) // wraps to math.MinInt64 for 1<<63, as intended
	}
	r.fail(r.field(name), "not a canonical 64-bit integer")
	return 0
}

// Uint reads an unsigned integer field.
func (r *ObjectReader) Uint(name string) uint64 {
	if !r.key(name) {
		return 0
	}
	u, _ := r.digits(r.field(name))
	return u
}

// digits reads a canonical unsigned decimal: no sign, no leading zero, no
// fraction or exponent, at most 2^64-1.
func (r *ObjectReader) digits(field string) (uint64, bool) {
	u, n, ok := parseUint(r.b[r.i:])
	if !ok {
		r.fail(field, "not a canonical unsigned integer")
		return 0, false
	}
	r.i += n
	return u, true
}

func parseUint(b []byte) (v uint64, n int, ok bool) {
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		d := uint64(b[n] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, 0, false
		}
		v = v*10 + d
		n++
	}
	if n == 0 || n > 1 && b[0] == '0' {
		return 0, 0, false
	}
	if n < len(b) && (b[n] == '.' || b[n] == 'e' || b[n] == 'E') {
		return 0, 0, false
	}
	return v, n, true
}

// Bool reads a boolean field.
func (r *ObjectReader) Bool(name string) bool {
	if !r.key(name) {
		return false
	}
	rest := r.b[r.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		r.i += 4
		return true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		r.i += 5
		return false
	}
	r.fail(r.field(name), "not a boolean")
	return false
}

// Raw reads a field whose value is a JSON object, kept as bytes.
func (r *ObjectReader) Raw(name string) Raw {
	if !r.key(name) {
		return Raw{}
	}
	n := objectEnd(r.b[r.i:])
	if n < 0 {
		r.fail(r.field(name), "not a JSON object")
		return Raw{}
	}
	raw, err := NewRaw(r.b[r.i : r.i+n])
	if err != nil {
		r.fail(r.field(name), "not a JSON object")
		return Raw{}
	}
	r.i += n
	return raw
}

// objectEnd returns the length of the JSON object at the start of b, found
// by matching braces outside strings, or -1. NewRaw validates the result.
func objectEnd(b []byte) int {
	if len(b) == 0 || b[0] != '{' {
		return -1
	}
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// Begin opens a nested object field.
func (r *ObjectReader) Begin(name string) {
	if !r.key(name) {
		return
	}
	r.path = r.field(name)
	if r.i >= len(r.b) || r.b[r.i] != '{' {
		r.fail(r.path, "expected a JSON object")
		return
	}
	r.i++
	r.more = false
	r.open++
}

// OptionalBegin opens a nested object field if it is present and reports
// whether it did; call End only when it returns true.
func (r *ObjectReader) OptionalBegin(name string) bool {
	if r.err != nil || !r.hasKey(name) {
		return false
	}
	r.Begin(name)
	return true
}

// End closes the innermost nested object.
func (r *ObjectReader) End() {
	if r.err != nil || r.open <= 1 {
		return
	}
	r.close()
	if i := strings.LastIndexByte(r.path, '.'); i >= 0 {
		r.path = r.path[:i]
	}
}

func (r *ObjectReader) close() {
	if r.i >= len(r.b) || r.b[r.i] != '}' {
		r.fail(r.path, "unexpected field or missing closing brace")
		return
	}
	r.i++
	r.more = true
	r.open--
}

// Close finishes the outermost object and returns the first error, if any.
// Bytes after the object are an error.
func (r *ObjectReader) Close() error {
	if r.err == nil && r.open != 1 {
		r.fail(r.path, "nested object not closed")
	}
	if r.err == nil {
		r.close()
	}
	if r.err == nil && r.i != len(r.b) {
		r.fail(r.path, "trailing bytes after the object")
	}
	return r.err
}

// str reads a JSON string value.
func (r *ObjectReader) str(field string) string {
	b := r.b
	i := r.i
	if i >= len(b) || b[i] != '"' {
		r.fail(field, "expected a string")
		return ""
	}
	i++
	start := i
	for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
		i++
	}
	if i < len(b) && b[i] == '"' {
		if !utf8.Valid(b[start:i]) {
			r.fail(field, "not valid UTF-8")
			return ""
		}
		r.i = i + 1
		return string(b[start:i])
	}
	s, n, reason := unquoteSlow(b[start:])
	if reason != "" {
		r.fail(field, reason)
		return ""
	}
	r.i = start + n
	return s
}

// unquoteSlow decodes a string body that contains escapes. It returns the
// value, the bytes consumed including the closing quote, and a reason on
// failure.
func unquoteSlow(b []byte) (string, int, string) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				return "", 0, "not valid UTF-8"
			}
			return string(out), i + 1, ""
		case c < 0x20:
			return "", 0, "control character in string"
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(b) {
			break
		}
		switch e := b[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'u':
			r, ok := hex4(b[i+2:])
			if !ok {
				return "", 0, "bad unicode escape"
			}
			i += 6
			if r >= 0xd800 && r < 0xdc00 {
				lo, ok := rune(0), false
				if len(b)-i >= 6 && b[i] == '\\' && b[i+1] == 'u' {
					lo, ok = hex4(b[i+2:])
				}
				if !ok || lo < 0xdc00 || lo >= 0xe000 {
					return "", 0, "lone surrogate escape"
				}
				r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
				i += 6
			} else if r >= 0xdc00 && r < 0xe000 {
				return "", 0, "lone surrogate escape"
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", 0, "bad escape"
		}
		i += 2
	}
	return "", 0, "unterminated string"
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// validObject reports whether b is exactly one JSON object, with nothing
// around it.
func validObject(b []byte) bool {
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}' && json.Valid(b)
}
