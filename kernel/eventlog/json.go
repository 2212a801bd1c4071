package eventlog

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// Canonical JSON, written by hand so that the same value always has the same
// bytes and so that its length can be known without writing it. Strings are
// escaped minimally: '"', '\\', control characters, U+2028 and U+2029.
// Invalid UTF-8 becomes U+FFFD, as encoding/json does. Nothing else is
// escaped (no HTML escaping), and there is never any whitespace.

const hexDigits = "0123456789abcdef"

// escLen[c] is the encoded length of the ASCII byte c inside a string.
var escLen = func() (t [utf8.RuneSelf]uint8) {
	for c := range t {
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
			t[c] = 2
		case c < 0x20:
			t[c] = 6
		default:
			t[c] = 1
		}
	}
	return t
}()

// AppendString appends s as a canonical JSON string, quotes included.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if len(s)-i >= 8 && plain8(s[i:i+8]) {
			i += 8
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if escLen[c] == 1 {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// StringLen returns len(AppendString(nil, s)) without allocating.
func StringLen(s string) int {
	// Most strings need no escaping: confirm that with as little work per
	// byte as possible, and count exactly only from the first byte that
	// may need it.
	i := 0
	for ; len(s)-i >= 8; i += 8 {
		if !plain8(s[i : i+8]) {
			return i + stringLenFrom(s[i:])
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return i + stringLenFrom(s[i:])
		}
	}
	return len(s) + 2
}

// stringLenFrom is StringLen counted byte by byte.
func stringLenFrom(s string) int {
	n := 2
	for i := 0; i < len(s); {
		if len(s)-i >= 8 && plain8(s[i:i+8]) {
			n += 8
			i += 8
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			n += int(escLen[c])
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// plain8 reports whether the 8 bytes of s are ASCII that a string encodes
// as is (no control character, '"' or '\\'), testing them as one word so
// that measuring and writing the common plain text skips most of the
// per-byte work. A false answer only sends the caller down the per-byte
// path, which decides exactly.
func plain8(s string) bool {
	_ = s[7]
	w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	const ones, high = 0x0101010101010101, 0x8080808080808080
	q, b := w^(ones*'"'), w^(ones*'\\')
	special := w | // a byte of 0x80 or above
		(w-ones*0x20)&^w | // a byte below 0x20
		(q-ones)&^q | // a '"'
		(b-ones)&^b // a '\\'
	return special&high == 0
}

// AppendInt appends v in canonical decimal form.
func AppendInt(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }

// IntLen returns len(AppendInt(nil, v)).
func IntLen(v int64) int {
	if v < 0 {
		if v == -1<<63 {
			return 20
		}
		return 1 + UintLen(uint64(-v))
	}
	return UintLen(uint64(v))
}

// AppendUint appends v in canonical decimal form.
func AppendUint(dst []byte, v uint64) []byte { return strconv.AppendUint(dst, v, 10) }

// UintLen returns len(AppendUint(nil, v)).
func UintLen(v uint64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// AppendBool appends true or false.
func AppendBool(dst []byte, v bool) []byte { return strconv.AppendBool(dst, v) }

// BoolLen returns len(AppendBool(nil, v)).
func BoolLen(v bool) int {
	if v {
		return 4
	}
	return 5
}

// TimeLayout is the canonical time form: UTC, RFC 3339 with exactly nine
// fractional digits, so every time has the same length (30 bytes) and encoded
// times sort as text. time.Parse(time.RFC3339Nano, s) reads it.
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

const timeLen = len(TimeLayout)

// Seconds since the Unix epoch of the times TimeLayout can write: years 0000
// to 9999.
var (
	minUnix = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	maxUnix = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
)

// validTime reports whether t can be written in TimeLayout: not the zero
// time and a year of four digits.
func validTime(t time.Time) bool {
	sec := t.Unix()
	return sec >= minUnix && sec < maxUnix && !t.IsZero()
}

// appendTime appends t, already in UTC and valid, without quotes. It avoids
// time.AppendFormat's layout interpretation on the encoding path.
func appendTime(dst []byte, t time.Time) []byte {
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	dst = appendDigits(dst, year, 4)
	dst = append(dst, '-')
	dst = appendDigits(dst, int(month), 2)
	dst = append(dst, '-')
	dst = appendDigits(dst, day, 2)
	dst = append(dst, 'T')
	dst = appendDigits(dst, hour, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, minute, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, sec, 2)
	dst = append(dst, '.')
	dst = appendDigits(dst, t.Nanosecond(), 9)
	return append(dst, 'Z')
}

func appendDigits(dst []byte, v, width int) []byte {
	var buf [9]byte
	for i := width - 1; i >= 0; i-- {
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, buf[:width]...)
}
