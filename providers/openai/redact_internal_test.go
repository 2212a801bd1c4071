package openai

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRedactStreamedText cuts text that holds the key (in any case) into
// chunks at arbitrary points and feeds them to a stream: the key never
// appears in what the stream emits, and text without the key comes out
// whole.
func FuzzRedactStreamedText(f *testing.F) {
	f.Add("sk-proj-abc123XYZ", "before KEY after", []byte{3, 9, 1})
	f.Add("sk-proj-abc123XYZ", "KEYKEY sk-proj-ab KEY", []byte{1, 1, 1, 1, 1, 1, 1, 1})
	f.Add("abcd", "xxabcabcdabc", []byte{2, 2, 2})
	f.Add("sk-ant-0123456789", "no key at all, only sk- and s", []byte{5})
	f.Fuzz(func(t *testing.T, key, text string, cuts []byte) {
		if len(key) < minKeyBytes || len(key) > 64 || len(text) > 4096 || len(cuts) > 64 || checkKey(key) != nil {
			return
		}
		full := strings.ReplaceAll(text, "KEY", key)
		if len(full) > 8192 || !utf8.ValidString(full) { // the decoder makes text UTF-8
			return
		}
		s := &stream{p: &Provider{s: settings{apiKey: key, redact: newRedactor(key)}}, cancel: func() {}}
		rest := full
		for _, c := range cuts {
			n := min(int(c), len(rest))
			s.text(rest[:n])
			rest = rest[n:]
		}
		s.text(rest)
		s.flushText()
		var out strings.Builder
		for _, it := range s.pending {
			out.WriteString(it.Text())
		}
		got := out.String()
		if s.done {
			return // a bound failed the stream; nothing more to check
		}
		if strings.Contains(strings.ToLower(got), strings.ToLower(key)) {
			t.Fatalf("the key reached the items: %q", got)
		}
		if want := s.p.s.redact.redact(full); got != want {
			t.Fatalf("streamed %q, redacted whole %q", got, want)
		}
	})
}
