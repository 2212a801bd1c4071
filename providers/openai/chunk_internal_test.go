package openai

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChunkDecodeReadsTheFieldsTheStreamNeeds(t *testing.T) {
	var d chunkDecoder
	c, err := d.decode([]byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini",
		"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi \u00e9\ud83d\ude00\n","refusal":null,
		"tool_calls":[{"index":1,"id":"call_a","type":"function","function":{"name":"fs_read","arguments":"{\"p\":"}}]},
		"logprobs":null,"finish_reason":null},{"index":1,"delta":{"content":5}}],
		"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"details":{"x":[1,2.5e3,true,false,null]}}}` + "\n"))
	require.NoError(t, err)
	require.Equal(t, "chatcmpl-1", string(c.id))
	require.Equal(t, "gpt-4o-mini", string(c.model))
	require.True(t, c.usage)
	require.Equal(t, [2]int64{19, 10}, [2]int64{c.prompt, c.output})
	require.False(t, c.bad)
	require.Len(t, c.choices, 2)
	ch := c.choices[0]
	require.Equal(t, "Hi é😀\n", string(ch.content))
	require.Empty(t, ch.finish)
	require.False(t, ch.bad)
	require.Len(t, ch.calls, 1)
	f := ch.calls[0]
	require.Equal(t, int64(1), f.index)
	require.Equal(t, "call_a", string(f.id))
	require.Equal(t, "fs_read", string(f.name))
	require.Equal(t, `{"p":`, string(f.args))
	require.True(t, c.choices[1].bad, "content of the wrong type marks its choice")

	// The next chunk reuses the buffers and keeps nothing of this one.
	c, err = d.decode([]byte(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`))
	require.NoError(t, err)
	require.False(t, c.usage)
	require.Empty(t, c.id)
	require.Len(t, c.choices, 1)
	require.Empty(t, c.choices[0].calls)
	require.Equal(t, "stop", string(c.choices[0].finish))
}

func TestChunkDecodeRejectsWhatIsNotOneObject(t *testing.T) {
	for _, in := range []string{``, `[]`, `"x"`, `{`, `{"a":}`, `{"a":1,}`, `{} {}`, `{"a":01}`, `{"a":"\x01"}`,
		`{"a":"\q"}`, `{"a":tru}`, `{"a":[1 2]}`, `{"a":1.}`, `{"a":-}`, `{"choices":[{"index":1e}]}`,
		`{"a":` + string(bytes.Repeat([]byte("["), maxChunkDepth+1)) + `}`} {
		var d chunkDecoder
		_, err := d.decode([]byte(in))
		require.ErrorIs(t, err, errChunkSyntax, "%q", in)
	}
	var d chunkDecoder
	for in, bad := range map[string]bool{`{"choices":5}`: true, `{"usage":"x"}`: true, `{"choices":null,"usage":null}`: false, `null`: false} {
		c, err := d.decode([]byte(in))
		require.NoError(t, err, in)
		require.Equal(t, bad, c.bad, in)
	}
	c, err := d.decode([]byte(`{"error":{"message":"overloaded"}}`))
	require.NoError(t, err)
	require.True(t, c.errorKey)
}

// FuzzChunkDecode holds the chunk decoder to encoding/json on arbitrary
// bytes (at most 64 KiB): it accepts exactly the valid JSON objects (and
// null) nested less than its depth bound, and reads strings as
// encoding/json does, invalid UTF-8 and lone surrogates included.
func FuzzChunkDecode(f *testing.F) {
	for _, s := range []string{
		`{"id":"a\"b\\c\/\b\f\n\r\t\u0041\ud800\udc00\ud800x","model":"m\xff\xfe"}`,
		`{"choices":[{"index":0,"delta":{"content":"x","tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":"stop"}]}`,
		`{"usage":{"prompt_tokens":1,"completion_tokens":-2},"error":null}`,
		`null`, `[1]`, `{"a":[{"b":[{}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			t.Skip()
		}
		var d chunkDecoder
		c, err := d.decode(data)
		var v any
		jerr := json.Unmarshal(data, &v)
		if err == nil {
			require.NoError(t, jerr, "accepted what encoding/json refuses")
			if v == nil {
				return
			}
			m, ok := v.(map[string]any)
			require.True(t, ok)
			for key, got := range map[string][]byte{"id": c.id, "model": c.model} {
				if want, ok := m[key].(string); ok {
					require.Equal(t, want, string(got), key)
				}
			}
			return
		}
		if _, obj := v.(map[string]any); jerr == nil && (obj || v == nil) {
			require.Greater(t, bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")), maxChunkDepth-8,
				"refused a valid object: %v", err)
		}
	})
}

// BenchmarkChunkDecodeEscaped decodes a chunk whose content has escapes
// and non-ASCII text, the path the hand-written string decoder takes
// instead of encoding/json (see the package documentation).
func BenchmarkChunkDecodeEscaped(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"content":" line\nnext \u00e9t\u00e9 \"q\""},"logprobs":null,"finish_reason":null}],"usage":null}`)
	var d chunkDecoder
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
