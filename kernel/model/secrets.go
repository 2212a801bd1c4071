package model

import "bytes"

// The key rule of K3. A key is split into lower-case ASCII words at
// non-alphanumeric bytes and camelCase boundaries ("X-Api-Key" and
// "xApiKey" are both x, api, key). The key is sensitive when:
//
//   - its letters and digits run together contain a strong term
//     ("xapikey", "mypassword", "clientsecret"), or are themselves a strong
//     or content word ("a-u-t-h", "Pro_mpt");
//   - a word, or two adjacent words joined, is a strong word ("auth",
//     "session", "api"+"key", "access"+"token", "set"+"cookie");
//   - a word names content ("prompt", "token", "messages", "system",
//     "instructions", "input") and is not followed by a word that makes it a
//     quantity or a label ("prompt_tokens", "token_count",
//     "system_fingerprint", "prompt_eval_count" are allowed).
//
// A bare "key" is allowed: it is too common in harmless data, and its value
// is still checked by credentialLike.

// hasStrongSubstring reports whether b contains a term that is sensitive
// wherever it appears in a key's letters run together: authorization,
// authorisation, apikey, accesstoken, password, passwd, privatekey, secret,
// systemprompt, credential, cookie, bearer, refreshtoken.
func hasStrongSubstring(b []byte) bool {
	for i, c := range b {
		r := b[i:]
		switch c {
		case 'a':
			if hasPrefix(r, "authorization") || hasPrefix(r, "authorisation") ||
				hasPrefix(r, "apikey") || hasPrefix(r, "accesstoken") {
				return true
			}
		case 'p':
			if hasPrefix(r, "password") || hasPrefix(r, "passwd") || hasPrefix(r, "privatekey") {
				return true
			}
		case 's':
			if hasPrefix(r, "secret") || hasPrefix(r, "systemprompt") {
				return true
			}
		case 'c':
			if hasPrefix(r, "credential") || hasPrefix(r, "cookie") {
				return true
			}
		case 'b':
			if hasPrefix(r, "bearer") {
				return true
			}
		case 'r':
			if hasPrefix(r, "refreshtoken") {
				return true
			}
		}
	}
	return false
}

func hasPrefix(b []byte, s string) bool { return len(b) >= len(s) && string(b[:len(s)]) == s }

func isStrongWord(w string) bool {
	switch w {
	case "auth", "authn", "authz", "authentication", "oauth", "authorization", "authorisation",
		"apikey", "apikeys", "accesskey", "secretkey", "privatekey",
		"secret", "secrets", "clientsecret",
		"password", "passwords", "passwd", "passphrase", "pwd",
		"credential", "credentials", "creds",
		"cookie", "cookies", "setcookie",
		"bearer", "jwt",
		"session", "sessions", "sessionid",
		"accesstoken", "refreshtoken", "idtoken", "authtoken", "sessiontoken":
		return true
	}
	return false
}

func isContentWord(w string) bool {
	switch w {
	case "prompt", "prompts", "token", "messages", "system", "instructions", "input":
		return true
	}
	return false
}

// isQualifier: a word that turns a content word into the name of a
// quantity or a label.
func isQualifier(w string) bool {
	switch w {
	case "tokens", "token", "count", "counts", "eval", "cache", "cached", "length", "len",
		"size", "bytes", "chars", "characters", "duration", "ms", "time", "index",
		"filter", "filters", "id", "fingerprint", "hash", "version", "usage", "details":
		return true
	}
	return false
}

type span struct{ start, end int }

// sensitiveKey reports whether a decoded object key names credentials,
// authorization data, prompts or secrets. It allocates nothing for keys of
// ordinary length.
func sensitiveKey(key []byte) bool {
	var wordBuf [128]byte
	var spanBuf [16]span
	words, spans := splitWords(key, wordBuf[:0], spanBuf[:0])

	// words holds the words back to back, so it is also the key's letters
	// and digits run together.
	if hasStrongSubstring(words) {
		return true
	}
	// The whole key with separators ignored ("a-u-t-h", "Pro_mpt").
	if isStrongWord(string(words)) || isContentWord(string(words)) {
		return true
	}

	var twoBuf [64]byte
	for i, s := range spans {
		w := words[s.start:s.end]
		if isStrongWord(string(w)) {
			return true
		}
		var next []byte
		if i+1 < len(spans) {
			next = words[spans[i+1].start:spans[i+1].end]
			if isStrongWord(string(append(append(twoBuf[:0], w...), next...))) {
				return true
			}
		}
		if isContentWord(string(w)) && (next == nil || !isQualifier(string(next))) {
			return true
		}
	}
	return false
}

// splitWords appends the lower-case words of key to words and their
// positions to spans.
func splitWords(key, words []byte, spans []span) ([]byte, []span) {
	start := -1
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !isAlnum(c) {
			if start >= 0 {
				spans = append(spans, span{start, len(words)})
				start = -1
			}
			continue
		}
		// A camelCase boundary: "aB", "1B", or the last capital of an
		// acronym followed by lower case ("APIKey" → API, Key).
		if start >= 0 && isUpper(c) && i > 0 &&
			(!isUpper(key[i-1]) || i+1 < len(key) && isLower(key[i+1])) {
			spans = append(spans, span{start, len(words)})
			start = -1
		}
		if start < 0 {
			start = len(words)
		}
		if isUpper(c) {
			c += 'a' - 'A'
		}
		words = append(words, c)
	}
	if start >= 0 {
		spans = append(spans, span{start, len(words)})
	}
	return words, spans
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlnum(c byte) bool { return isUpper(c) || isLower(c) || isDigit(c) }

// isTokenChar: the alphabet of API keys and URL-safe base64.
func isTokenChar(c byte) bool { return isAlnum(c) || c == '-' || c == '_' }

// isUpperDigit: the alphabet of AWS access key IDs.
func isUpperDigit(c byte) bool { return isUpper(c) || isDigit(c) }

// A credential shape: a literal prefix at a word start, followed by at least
// min bytes of the token alphabet.
type shape struct {
	prefix []byte
	min    int
	alpha  func(byte) bool
}

var shapes = []shape{
	{[]byte("sk-"), 20, isTokenChar}, // OpenAI, Anthropic, DeepSeek and others
	{[]byte("sk_live_"), 16, isAlnum}, {[]byte("sk_test_"), 16, isAlnum},
	{[]byte("rk_live_"), 16, isAlnum}, {[]byte("rk_test_"), 16, isAlnum},
	{[]byte("ghp_"), 30, isAlnum}, {[]byte("gho_"), 30, isAlnum},
	{[]byte("ghu_"), 30, isAlnum}, {[]byte("ghs_"), 30, isAlnum},
	{[]byte("ghr_"), 30, isAlnum}, {[]byte("github_pat_"), 20, isTokenChar},
	{[]byte("glpat-"), 20, isTokenChar},
	{[]byte("xoxb-"), 10, isTokenChar}, {[]byte("xoxp-"), 10, isTokenChar},
	{[]byte("xoxa-"), 10, isTokenChar}, {[]byte("xoxs-"), 10, isTokenChar},
	{[]byte("AKIA"), 16, isUpperDigit}, {[]byte("ASIA"), 16, isUpperDigit},
	{[]byte("AIza"), 30, isTokenChar},
	{[]byte("hf_"), 30, isAlnum},
	{[]byte("gsk_"), 20, isAlnum},
}

var pemPrivateKey = []byte("PRIVATE KEY-----")

// minCredentialBytes is the length of the shortest shape ("xoxb-" and ten
// token bytes); shorter strings are skipped without a scan.
const minCredentialBytes = 15

// credentialLike reports whether s contains a well-known credential shape:
// one of shapes, a JWT, a PEM private key, or "Bearer " (any case) followed
// by a token of at least 16 bytes that contains a digit. It is one pass over
// s that looks only at word starts.
func credentialLike(s []byte) bool {
	if len(s) < minCredentialBytes {
		return false
	}
	if bytes.Contains(s, pemPrivateKey) {
		return true
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) || !wordStart(s, i) {
			continue
		}
		rest := s[i:]
		for _, sh := range shapes {
			if rest[0] == sh.prefix[0] && bytes.HasPrefix(rest, sh.prefix) &&
				run(rest[len(sh.prefix):], sh.alpha) >= sh.min {
				return true
			}
		}
		switch rest[0] {
		case 'e':
			if bytes.HasPrefix(rest, []byte("eyJ")) && isJWT(rest) {
				return true
			}
		case 'b', 'B':
			if bearer(rest) {
				return true
			}
		}
	}
	return false
}

func wordStart(s []byte, i int) bool { return i == 0 || !isAlnum(s[i-1]) }

// run returns how many leading bytes of s are in alpha.
func run(s []byte, alpha func(byte) bool) int {
	n := 0
	for n < len(s) && alpha(s[n]) {
		n++
	}
	return n
}

// isJWT: three base64url segments separated by dots, the first two at
// least 10 bytes long.
func isJWT(s []byte) bool {
	a := run(s, isTokenChar)
	if a < 10 || a >= len(s) || s[a] != '.' {
		return false
	}
	s = s[a+1:]
	b := run(s, isTokenChar)
	return b >= 10 && b < len(s) && s[b] == '.'
}

func bearer(s []byte) bool {
	const word = "bearer"
	if len(s) < len(word)+1 || !bytes.EqualFold(s[:len(word)], []byte(word)) {
		return false
	}
	s = s[len(word):]
	sp := run(s, func(c byte) bool { return c == ' ' || c == '\t' })
	if sp == 0 {
		return false
	}
	s = s[sp:]
	n := run(s, func(c byte) bool {
		return isTokenChar(c) || c == '.' || c == '~' || c == '+' || c == '/' || c == '='
	})
	return n >= 16 && bytes.ContainsFunc(s[:n], func(r rune) bool { return r >= '0' && r <= '9' })
}
