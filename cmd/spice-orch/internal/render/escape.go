package render

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text returns s as it may reach a terminal. Text from a model, a tool, a
// file or a server could otherwise clear the screen, set the window title,
// rewrite a line with a carriage return or write the clipboard (OSC 52):
// every control character except newline and tab, DEL, every C1 control,
// every bidirectional formatting character, every other invisible
// formatting character (zero-width spaces and joiners, the byte order
// mark: Unicode's format category) and every byte that is not UTF-8 is
// shown as a visible escape (\x1b, \r, \u202e, \u200b, \xff) instead.
// A backslash stays as it is: the escapes are for a person to read, not to
// decode.
func Text(s string) string { return escape(s, false) }

// Field is Text for a value shown on one line (a name, an ID, a reason):
// newlines and tabs are shown as \n and \t too.
func Field(s string) string { return escape(s, true) }

func escape(s string, oneLine bool) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unsafeRune(r, n, oneLine) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s // the common case: nothing to show differently
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unsafeRune(r, n, oneLine) {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			writeHex(&b, uint32(s[i]), 2)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x100:
			b.WriteString(`\x`)
			writeHex(&b, uint32(r), 2)
		default:
			b.WriteString(`\u`)
			writeHex(&b, uint32(r), 4)
		}
		i += n
	}
	return b.String()
}

// unsafeRune reports whether the rune r, n bytes long, must be escaped.
func unsafeRune(r rune, n int, oneLine bool) bool {
	switch {
	case r == utf8.RuneError && n == 1:
		return true // not UTF-8: a lone 0x9b is CSI to some terminals
	case r == '\n' || r == '\t':
		return oneLine
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true // bidirectional marks, embeddings, overrides and isolates
	case r >= 0xa0 && unicode.Is(unicode.Cf, r):
		// Invisible formatting: zero-width spaces and joiners, the byte
		// order mark, soft hyphens, tag characters. They hide text from
		// a reader; an emoji sequence joined by U+200D is shown apart.
		return true
	}
	return false
}

func writeHex(b *strings.Builder, v uint32, digits int) {
	h := strconv.FormatUint(uint64(v), 16)
	for range digits - len(h) {
		b.WriteByte('0')
	}
	b.WriteString(h)
}
