package openai

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzJSONStringDecodesBack: appendString and appendEscaped write a JSON
// string that encoding/json reads back as it reads its own Marshal of the
// string (invalid UTF-8 becomes U+FFFD), whatever the bytes.
func FuzzJSONStringDecodesBack(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\/\b\f\n\r\t\x00\x1f\x7f", "<a href='x'>&amp;</a>",
		"\u2028\u2029é日本🎉", "\xff\xfe bad \xe2\x82", "fs.read"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		marshalled, err := json.Marshal(s)
		require.NoError(t, err)
		var want, got string
		require.NoError(t, json.Unmarshal(marshalled, &want))
		require.NoError(t, json.Unmarshal(appendString(nil, s), &got))
		require.Equal(t, want, got)
		prefix := []byte(`{"x":"ab`)
		b := append(appendEscaped(prefix, s), '"', '}')
		var o struct{ X string }
		require.NoError(t, json.Unmarshal(b, &o))
		require.Equal(t, "ab"+want, o.X)
	})
}

func TestAppendWireNameIsWireNameQuoted(t *testing.T) {
	for _, name := range []string{"get_weather", "fs.read", ".a..b.", "é.\"x\""} {
		require.Equal(t, string(appendString(nil, wireName(name))), string(appendWireName(nil, name)), name)
	}
}
