package model

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// Metadata is optional, provider-specific data about one response: a JSON
// object under a namespace that names its provider ("openai", "ollama").
// It is bounded (bound.MaxMetadataBytes, bound.MaxMetadataDepth) and never
// carries credentials, authorization data, prompts or secrets (K3). The
// zero Metadata means "none".
type Metadata struct {
	namespace string
	raw       string // the JSON object exactly as given
}

// NewMetadata validates raw and returns a copy of it under namespace, a
// bound.Name. raw must be one UTF-8 JSON object of at most bound.MaxMetadataBytes
// nested at most bound.MaxMetadataDepth deep (the outer object is depth 1).
//
// NewMetadata rejects, at any depth:
//   - an object key that names credentials, authorization data, prompts or
//     secrets (see sensitiveKey for the exact rule: for example
//     "Authorization", "api_key", "x-api-key", "accessToken", "password",
//     "set-cookie", "session_id", "system_prompt", "messages"), while
//     quantities such as "prompt_tokens" or "token_count" are allowed;
//   - a key or string value that contains a well-known credential shape (see
//     credentialLike: "Bearer <token>", "sk-…" API keys, GitHub, GitLab,
//     Slack, AWS, Google and Hugging Face tokens, JWTs, PEM private keys).
//
// The checks are a safety net, not a licence: a provider must still never
// put secrets into metadata. Errors never quote the offending key or value.
func NewMetadata(namespace string, raw []byte) (Metadata, error) {
	if err := bound.Name("metadata.namespace", namespace); err != nil {
		return Metadata{}, err
	}
	if len(raw) == 0 {
		return Metadata{}, bound.Missing("metadata.json")
	}
	if err := bound.Bytes("metadata.json", len(raw), bound.MaxMetadataBytes); err != nil {
		return Metadata{}, err
	}
	// encoding/json accepts invalid UTF-8 inside strings; events and
	// snapshots must never carry it.
	if !utf8.Valid(raw) || !json.Valid(raw) {
		return Metadata{}, bound.Malformedf("metadata.json", "not valid UTF-8 JSON")
	}
	if raw[skipSpace(raw, 0)] != '{' {
		return Metadata{}, bound.Malformedf("metadata.json", "must be a JSON object")
	}
	if err := scanMetadata(raw); err != nil {
		return Metadata{}, err
	}
	return Metadata{namespace: namespace, raw: string(raw)}, nil
}

// Namespace returns the provider namespace, "" for the zero Metadata.
func (m Metadata) Namespace() string { return m.namespace }

// JSON returns a copy of the JSON object, nil for the zero Metadata.
func (m Metadata) JSON() json.RawMessage {
	if m.raw == "" {
		return nil
	}
	return json.RawMessage(m.raw)
}

// JSONString returns the JSON object without copying.
func (m Metadata) JSONString() string { return m.raw }

// IsZero reports whether m is "no metadata".
func (m Metadata) IsZero() bool { return m.namespace == "" }

// scanMetadata walks JSON that json.Valid accepted: it measures nesting and
// checks every key and string value. It allocates only for strings that
// contain escapes, which it must decode to judge.
func scanMetadata(raw []byte) error {
	depth, maxDepth := 0, 0
	var found error
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '{', '[':
			depth++
			maxDepth = max(maxDepth, depth)
		case '}', ']':
			depth--
		case '"':
			end, escaped := stringEnd(raw, i)
			if found == nil {
				found = checkString(raw[i:end+1], escaped, raw[skipSpace(raw, end+1)] == ':')
			}
			i = end
		}
	}
	if err := bound.Count("metadata.depth", maxDepth, bound.MaxMetadataDepth); err != nil {
		return err
	}
	return found
}

// checkString judges one quoted JSON string (quotes included).
func checkString(quoted []byte, escaped, isKey bool) error {
	s := quoted[1 : len(quoted)-1]
	if escaped {
		var d string
		if json.Unmarshal(quoted, &d) != nil {
			return bound.Malformedf("metadata.json", "not valid JSON")
		}
		s = []byte(d)
	}
	if isKey && sensitiveKey(s) {
		return bound.Malformedf("metadata.json",
			"an object key names credentials, authorization data, prompts or secrets")
	}
	if credentialLike(s) {
		return bound.Malformedf("metadata.json", "a key or value looks like a credential")
	}
	return nil
}

// stringEnd returns the index of the quote closing the string that opens at
// raw[start], and whether the string contains escapes. raw is valid JSON.
func stringEnd(raw []byte, start int) (int, bool) {
	escaped := false
	for j := start + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j, escaped
		}
	}
	return len(raw) - 1, escaped
}

// skipSpace returns the index of the first non-space byte at or after i,
// or len(raw)-1 when there is none, so that raw[skipSpace(...)] is safe for
// non-empty raw.
func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return min(i, len(raw)-1)
}
