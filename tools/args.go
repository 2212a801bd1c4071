package tools

import (
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// stringArg is one string argument of a tool's schema. Every argument of
// the tools here is a string, so the decoder knows no other type.
type stringArg struct {
	name     string
	required bool
	dst      *string
}

// argError is a mistake in a call's arguments, worded for the model. Its
// message names arguments, never their values.
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

func argErrorf(parts ...string) *argError { return &argError{msg: strings.Join(parts, "")} }

// decodeArgs decodes raw, a JSON object, into the given string arguments.
// It refuses what the schemas' "additionalProperties": false and
// "required" forbid, and more: duplicate keys (encoding/json keeps the
// last one silently), null or non-string values, invalid UTF-8 (which
// encoding/json would replace silently), and anything after the object.
func decodeArgs(raw string, args ...stringArg) *argError {
	if len(raw) > bound.MaxToolArgumentsBytes {
		return argErrorf("the arguments exceed ", strconv.Itoa(bound.MaxToolArgumentsBytes), " bytes")
	}
	if !utf8.ValidString(raw) {
		return argErrorf("the arguments are not valid UTF-8")
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return argErrorf("the arguments must be a JSON object")
	}
	seen := make([]bool, len(args))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return argErrorf("the arguments are not valid JSON")
		}
		key, _ := tok.(string)
		i := indexOf(args, key)
		if i < 0 {
			return argErrorf("unknown argument", quoteName(key), "; the schema allows ", names(args))
		}
		if seen[i] {
			return argErrorf("argument ", strconv.Quote(key), " is given twice")
		}
		seen[i] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return argErrorf("the arguments are not valid JSON")
		}
		if len(v) == 0 || v[0] != '"' {
			return argErrorf("argument ", strconv.Quote(key), " must be a string")
		}
		if err := json.Unmarshal(v, args[i].dst); err != nil {
			return argErrorf("argument ", strconv.Quote(key), " must be a string")
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return argErrorf("the arguments are not valid JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return argErrorf("the arguments must be one JSON object with nothing after it")
	}
	for i, a := range args {
		if a.required && !seen[i] {
			return argErrorf("missing required argument ", strconv.Quote(a.name))
		}
	}
	return nil
}

func indexOf(args []stringArg, key string) int {
	for i, a := range args {
		if a.name == key {
			return i
		}
	}
	return -1
}

// quoteName returns ` "key"` when key looks like an argument name, so a
// value pasted in the wrong place is never echoed back.
func quoteName(key string) string {
	if bound.Name("argument", key) != nil {
		return ""
	}
	return " " + strconv.Quote(key)
}

func names(args []stringArg) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(a.name))
	}
	return b.String()
}
