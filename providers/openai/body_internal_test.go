package openai

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzJSONStringMatchesMarshal holds appendString to encoding/json's
// Marshal of the same string, byte for byte, whatever the bytes (invalid
// UTF-8 included).
func FuzzJSONStringMatchesMarshal(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\/\b\f\n\r\t\x00\x1f\x7f", "<a href='x'>&amp;</a>",
		"\u2028\u2029é日本🎉", "\xff\xfe bad \xe2\x82", "fs.read"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendString(nil, s)))
	})
}

func TestAppendWireNameIsWireNameQuoted(t *testing.T) {
	for _, name := range []string{"get_weather", "fs.read", ".a..b.", "é.\"x\""} {
		require.Equal(t, string(appendString(nil, wireName(name))), string(appendWireName(nil, name)), name)
	}
}
