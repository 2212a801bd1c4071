package remotespec

import (
	"encoding/json"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/providers/openai"
)

// shown is what serve shows of a submitted spec: its JSON without
// secrets (spec.Shown), and a redaction of this server's OpenAI key, in
// any of its encodings, from every text of the submission the page and
// the API show (a client may have pasted it into a system prompt).
func shown(s spec.Spec, getenv func(string) string) (json.RawMessage, func(string) string) {
	b, err := s.Shown().JSON()
	if err != nil {
		b = nil
	}
	key := ""
	if getenv != nil {
		key = getenv(openai.EnvAPIKey)
	}
	if key == "" {
		return b, nil
	}
	return b, func(t string) string { return openai.RedactKey(t, key) }
}
