package bound

import "unicode/utf8"

func validUTF8(s string) bool { return utf8.ValidString(s) }

// Name checks a name: 1..MaxNameBytes bytes of [a-z0-9], '.', '_' or '-',
// starting with a letter. Names are what models and logs see, so they are
// kept to a portable alphabet.
func Name(field, s string) error {
	if s == "" {
		return Missing(field)
	}
	if err := Bytes(field, len(s), MaxNameBytes); err != nil {
		return err
	}
	if !(s[0] >= 'a' && s[0] <= 'z') {
		return Malformedf(field, "must start with a lower-case letter")
	}
	for i := 1; i < len(s); i++ {
		if !nameByte[s[i]] {
			return Malformedf(field, "only lower-case letters, digits, '.', '_' and '-' are allowed")
		}
	}
	return nil
}

// nameByte[c] reports whether c may follow a name's first letter: one
// load per byte on a path every event append takes.
var nameByte = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	return t
}()
