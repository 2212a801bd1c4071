package openai

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"
)

// redacted replaces the key, in any of its forms, in what is recorded.
const redacted = "[redacted]"

// minKeyBytes is the shortest key redacted: a shorter one would match
// ordinary text.
const minKeyBytes = 4

// redactor finds the API key in server text: as it is in any case, and in
// the encodings a server may quote it in (base64 and base64url at any
// alignment, hex, percent-encoding). The zero redactor changes nothing.
type redactor struct {
	fold  []string // matched in any ASCII case
	exact []string // matched as they are (base64 is case-sensitive)
	max   int      // the longest pattern's length
}

func newRedactor(key string) redactor {
	var r redactor
	if len(key) < minKeyBytes {
		return r
	}
	b := []byte(key)
	var every strings.Builder
	for _, c := range b {
		every.WriteByte('%')
		every.WriteString(strings.ToUpper(hex.EncodeToString([]byte{c})))
	}
	r.add(true, key, hex.EncodeToString(b), every.String(), url.QueryEscape(key), url.PathEscape(key))
	// The key inside longer encoded data ("Bearer sk-…" in base64) is
	// shifted by 0, 1 or 2 bytes; at each shift, the characters made of
	// the key's bits alone are the same whatever surrounds it.
	for shift := range 3 {
		in := append(make([]byte, shift), b...)
		from := (shift*8 + 5) / 6
		to := (shift + len(b)) * 8 / 6
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			if s := enc.EncodeToString(in); to-from >= minKeyBytes {
				r.add(false, s[from:to])
			}
		}
	}
	return r
}

func (r *redactor) add(fold bool, pats ...string) {
	for _, p := range pats {
		list := &r.exact
		if fold {
			list = &r.fold
		}
		if p == "" || slices.Contains(*list, p) {
			continue
		}
		*list = append(*list, p)
		r.max = max(r.max, len(p))
	}
}

// redact returns s with every form of the key replaced.
func (r *redactor) redact(s string) string {
	for _, p := range r.fold {
		s = replaceFold(s, p, redacted)
	}
	for _, p := range r.exact {
		s = strings.ReplaceAll(s, p, redacted)
	}
	return s
}

// tail returns where the end of s that may begin the key (or one of its
// forms) starts: that end is held back until the next chunk shows whether
// it does. It is len(s) when no end of s can.
func (r *redactor) tail(s string) int {
	for i := max(len(s)-r.max+1, 0); i < len(s); i++ {
		end := s[i:]
		for _, p := range r.fold {
			if len(end) < len(p) && asciiEqualFold(end, p[:len(end)]) {
				return i
			}
		}
		for _, p := range r.exact {
			if len(end) < len(p) && end == p[:len(end)] {
				return i
			}
		}
	}
	return len(s)
}

// RedactKey returns s with key replaced by "[redacted]" in each form
// the provider looks for it in a server's text: as it is in any ASCII
// case, base64 and base64url at any alignment, hex and percent-encoded.
// A key shorter than 4 bytes is not looked for. Hosts use it to keep the
// key out of what they show of a request.
func RedactKey(s, key string) string {
	r := newRedactor(key)
	return r.redact(s)
}
