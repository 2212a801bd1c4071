package eventlog_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

var jsonStrings = []string{
	"", "plain", `quote " and \ backslash`, "tab\tnewline\nreturn\r",
	"\b\f\x00\x01\x1f\x7f", "héllo wörld ✓ 🚀", "line\u2028para\u2029",
	"bad \xff utf8 \xc3", "<html>&amp;</html>", "/slash/",
}

// Canonical strings decode, with encoding/json, to the valid-UTF-8 form of
// the input, and StringLen is exact.
func TestAppendStringIsValidJSONWithExactLen(t *testing.T) {
	for _, s := range jsonStrings {
		b := eventlog.AppendString(nil, s)
		require.Equal(t, len(b), eventlog.StringLen(s), "%q", s)
		var got string
		require.NoError(t, json.Unmarshal(b, &got), "%q", s)
		require.Equal(t, string([]rune(s)), got)
	}
}

func TestAppendStringGolden(t *testing.T) {
	for in, want := range map[string]string{
		"a\"b\\c":          `"a\"b\\c"`,
		"\n\r\t\b\f":       `"\n\r\t\b\f"`,
		"\x00\x1f":         `"\u0000\u001f"`,
		"<&>":              `"<&>"`,
		"\u2028\u2029":     `"\u2028\u2029"`,
		"x\xffy":           `"x\ufffdy"`,
		"é":                `"é"`,
		"\xf0\x9f\x9a\x80": `"🚀"`,
	} {
		require.Equal(t, want, string(eventlog.AppendString(nil, in)))
	}
}

func TestIntLenExact(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 9, 10, -10, 99, 100, math.MaxInt64, math.MinInt64, math.MinInt64 + 1} {
		require.Equal(t, len(eventlog.AppendInt(nil, v)), eventlog.IntLen(v), v)
	}
	for _, v := range []uint64{0, 9, 10, 1 << 32, math.MaxUint64} {
		require.Equal(t, len(eventlog.AppendUint(nil, v)), eventlog.UintLen(v), v)
	}
	require.Equal(t, len(eventlog.AppendBool(nil, true)), eventlog.BoolLen(true))
	require.Equal(t, len(eventlog.AppendBool(nil, false)), eventlog.BoolLen(false))
}

// nested exercises every Object method, including a nested object.
type nested struct {
	ID    string
	Opt   string
	N     int64
	U     uint64
	B     bool
	Inner *note
	Raw   eventlog.Raw
}

func (p nested) fields(o *eventlog.Object) {
	o.String("id", p.ID)
	o.OptionalString("opt", p.Opt)
	o.Int("n", p.N)
	o.Uint("u", p.U)
	o.Bool("b", p.B)
	if p.Inner != nil {
		o.Begin("inner")
		p.Inner.fields(o)
		o.End()
	}
	o.Raw("raw", p.Raw)
}

func (p nested) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}

func (p nested) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readNested(b []byte) (nested, error) {
	r := eventlog.ReadObject("payload", b)
	var p nested
	p.ID = r.String("id")
	p.Opt = r.OptionalString("opt")
	p.N = r.Int("n")
	p.U = r.Uint("u")
	p.B = r.Bool("b")
	if r.OptionalBegin("inner") {
		p.Inner = &note{N: r.Int("n"), Text: r.OptionalString("text"), Flag: r.Bool("flag")}
		r.End()
	}
	p.Raw = r.Raw("raw")
	return p, r.Close()
}

func TestObjectWriteMeasureAndReadAgree(t *testing.T) {
	raw, err := eventlog.NewRaw([]byte(`{"a":[1,{"b":"}"}]}`))
	require.NoError(t, err)
	for _, p := range []nested{
		{ID: "x", Raw: raw},
		{ID: "q\"\n", Opt: "é", N: math.MinInt64, U: math.MaxUint64, B: true, Inner: &note{N: -5, Text: "t"}, Raw: raw},
		{ID: "", N: 7, Inner: &note{}, Raw: raw},
	} {
		b := p.AppendJSON([]byte("prefix"))
		b = b[len("prefix"):]
		require.Equal(t, len(b), p.EncodedLen(), string(b))
		require.True(t, json.Valid(b), string(b))
		got, err := readNested(b)
		require.NoError(t, err, string(b))
		require.Equal(t, p, got)
		require.Equal(t, b, got.AppendJSON(nil))
	}
	require.Equal(t,
		`{"id":"q","n":-1,"u":2,"b":true,"inner":{"n":3,"text":"x","flag":false},"raw":{"a":[1,{"b":"}"}]}}`,
		string(nested{ID: "q", N: -1, U: 2, B: true, Inner: &note{N: 3, Text: "x"}, Raw: raw}.AppendJSON(nil)))
}

func TestObjectReaderIsStrict(t *testing.T) {
	for name, in := range map[string]string{
		"whitespace":     `{"id":"x", "n":1,"u":2,"b":true,"raw":{}}`,
		"reordered":      `{"n":1,"id":"x","u":2,"b":true,"raw":{}}`,
		"unknown field":  `{"id":"x","zz":1,"n":1,"u":2,"b":true,"raw":{}}`,
		"extra at end":   `{"id":"x","n":1,"u":2,"b":true,"raw":{},"zz":1}`,
		"missing field":  `{"id":"x","u":2,"b":true,"raw":{}}`,
		"trailing bytes": `{"id":"x","n":1,"u":2,"b":true,"raw":{}} `,
		"leading zero":   `{"id":"x","n":01,"u":2,"b":true,"raw":{}}`,
		"negative zero":  `{"id":"x","n":-0,"u":2,"b":true,"raw":{}}`,
		"fraction":       `{"id":"x","n":1.0,"u":2,"b":true,"raw":{}}`,
		"overflow":       `{"id":"x","n":9223372036854775808,"u":2,"b":true,"raw":{}}`,
		"negative uint":  `{"id":"x","n":1,"u":-2,"b":true,"raw":{}}`,
		"bad bool":       `{"id":"x","n":1,"u":2,"b":yes,"raw":{}}`,
		"raw control":    "{\"id\":\"a\x01\",\"n\":1,\"u\":2,\"b\":true,\"raw\":{}}",
		"bad utf8":       "{\"id\":\"a\xff\",\"n\":1,\"u\":2,\"b\":true,\"raw\":{}}",
		"lone surrogate": `{"id":"\ud800","n":1,"u":2,"b":true,"raw":{}}`,
		"unterminated":   `{"id":"x`,
		"raw not object": `{"id":"x","n":1,"u":2,"b":true,"raw":[1]}`,
		"raw invalid":    `{"id":"x","n":1,"u":2,"b":true,"raw":{"a":}}`,
		"inner open":     `{"id":"x","n":1,"u":2,"b":true,"inner":{"n":1,"flag":true,"raw":{}}`,
		"not an object":  `["id"]`,
		"empty":          ``,
	} {
		_, err := readNested([]byte(in))
		require.ErrorIs(t, err, bound.ErrInvalid, name)
		var be *bound.Error
		require.ErrorAs(t, err, &be, name)
		require.True(t, strings.HasPrefix(be.Field, "payload"), name)
	}
}

func TestObjectReaderUnescapes(t *testing.T) {
	p, err := readNested([]byte(`{"id":"\u0041\/\ud83d\ude80\n","n":1,"u":2,"b":true,"raw":{}}`))
	require.NoError(t, err)
	require.Equal(t, "A/🚀\n", p.ID)
}

func FuzzAppendString(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1<<16 {
			return
		}
		b := eventlog.AppendString(nil, s)
		require.Equal(t, len(b), eventlog.StringLen(s))
		var got string
		require.NoError(t, json.Unmarshal(b, &got))
		require.Equal(t, string([]rune(s)), got)
	})
}

// AppendString and StringLen test eight bytes at a time where they can.
// Every byte value, and a few runes, at every position of strings around
// that word size must encode exactly as encoding/json without HTML
// escaping does, with StringLen exact.
func TestAppendStringWordPathMatchesEncodingJSON(t *testing.T) {
	ref := func(s string) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(s))
		return strings.TrimSuffix(b.String(), "\n")
	}
	specials := []string{"\u2028", "\u2029", "é", "🚀", "\xc3", "\xf0\x9f"}
	for c := range 256 {
		specials = append(specials, string([]byte{byte(c)}))
	}
	for _, n := range []int{7, 8, 9, 15, 16, 17, 24} {
		for pos := range n {
			for _, sp := range specials {
				s := strings.Repeat("a", pos) + sp + strings.Repeat("z", n-pos)
				got := string(eventlog.AppendString(nil, s))
				require.Equal(t, ref(s), got, "%q", s)
				require.Equal(t, len(got), eventlog.StringLen(s), "%q", s)
			}
		}
	}
}
