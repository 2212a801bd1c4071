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
//
// The key is taken out of the task and the system prompts before the
// JSON is made, since it may cut them: a key cut in two would be found
// by no later redaction.
func shown(s spec.Spec, getenv func(string) string) (json.RawMessage, func(string) string) {
	key := ""
	if getenv != nil {
		key = getenv(openai.EnvAPIKey)
	}
	var redact func(string) string
	if key != "" {
		redact = func(t string) string { return openai.RedactKey(t, key) }
		s.Task = redact(s.Task)
		for i := range s.Workers {
			s.Workers[i].System = redact(s.Workers[i].System)
		}
	}
	b, err := s.Shown().JSON()
	if err != nil {
		b = nil
	}
	return b, redact
}
