package tools

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

func TestDecodeArgs_IsStrict(t *testing.T) {
	var p, c string
	fields := func() []stringArg {
		p, c = "", ""
		return []stringArg{{name: "path", required: true, dst: &p}, {name: "content", dst: &c}}
	}
	require.Nil(t, decodeArgs(` {"path":"a\u00e9","content":"x\ny"} `, fields()...))
	require.Equal(t, "aé", p)
	require.Equal(t, "x\ny", c)
	require.Nil(t, decodeArgs(`{"path":"a"}`, fields()...))
	require.Empty(t, c)

	bad := map[string]string{
		`{}`:                      "missing required argument",
		`{"path":"a","x":"b"}`:    "unknown argument",
		`{"path":"a","path":"b"}`: "given twice",
		`{"path":1}`:              "must be a string",
		`{"path":null}`:           "must be a string",
		`{"path":"a"} {}`:         "nothing after it",
		`{"path":"a"}x`:           "nothing after it",
		`[]`:                      "must be a JSON object",
		`"path"`:                  "must be a JSON object",
		``:                        "must be a JSON object",
		`{"path":"a",}`:           "not valid JSON",
		`{"path" "a"}`:            "not valid JSON",
		`{"path":"a"`:             "not valid JSON",
		"{\"path\":\"\xff\"}":     "not valid UTF-8",
		`{"path":"` + strings.Repeat("a", bound.MaxToolArgumentsBytes) + `"}`: "exceed",
	}
	for raw, want := range bad {
		e := decodeArgs(raw, fields()...)
		require.NotNil(t, e, raw)
		require.Contains(t, e.Error(), want, raw)
	}
}

// FuzzArguments holds decodeArgs to its contract on arbitrary input: it
// never panics, accepts only a JSON object whose keys are known, given once,
// with string values, and then has set every required argument to valid
// UTF-8; every refusal is a bounded message that can become a problem.
func FuzzArguments(f *testing.F) {
	for _, s := range []string{`{"path":"a","content":"b"}`, `{"path":1}`, `{"path":"a","path":"a"}`, `{}`, `{"x":null}`, `[]`, `{"path":"\ud800"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if len(raw) > 4<<10 {
			return
		}
		var p, c string
		e := decodeArgs(raw, stringArg{name: "path", required: true, dst: &p}, stringArg{name: "content", dst: &c})
		if e != nil {
			require.NotPanics(t, func() { invalidArguments(e) })
			require.LessOrEqual(t, len(e.Error()), bound.MaxProblemBytes)
			return
		}
		require.True(t, utf8.ValidString(raw))
		require.True(t, utf8.ValidString(p))
		require.True(t, utf8.ValidString(c))
		require.True(t, json.Valid([]byte(raw)))
	})
}
