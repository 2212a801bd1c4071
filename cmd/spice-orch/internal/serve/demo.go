package serve

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/server"
)

// BuiltinYAML is the built-in pair as a spec, the form's first example.
func BuiltinYAML() string {
	s := spec.Builtin()
	q := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	var b strings.Builder
	b.WriteString("# The built-in pair: a scripted writer and reviewer that call the real\n")
	b.WriteString("# file tools, one rejected round and one approved. Offline, no API key.\n")
	b.WriteString("# It writes its draft without asking; remove approve: to approve each write.\n")
	b.WriteString("version: 1\nname: " + s.Name + "\ntask: " + q(s.Task) + "\npattern: review\napprove: never\nworkers:\n")
	for _, w := range s.Workers {
		b.WriteString("  - role: " + w.Role + "\n    provider: scripted\n    model: " + w.Model + "\n")
		b.WriteString("    max_turns: " + strconv.Itoa(w.MaxTurns) + "\n    system: " + q(w.System) + "\n")
	}
	b.WriteString("handoff:\n  done_marker: " + s.Handoff.DoneMarker + "\nlimits:\n  max_rounds: " + strconv.Itoa(s.Limits.MaxRounds) + "\n")
	return b.String()
}

// RelayYAML is a scripted relay, the form's second example.
const RelayYAML = `# A relay: the writer answers once, the reviewer once.
version: 1
name: relay-demo
pattern: relay
workers:
  - role: writer
    provider: scripted
    script:
      - text: "Here is a haiku. Autumn moon rises / over the quiet harbor / boats dream of the sea."
        usage: {input: 40, output: 20}
  - role: reviewer
    provider: scripted
    script:
      - text: "A fine haiku: five, seven, five."
        usage: {input: 60, output: 10}
`

// Examples are the specs the page offers in its form.
func Examples() []server.Example {
	return []server.Example{
		{Name: "builtin-review", Description: "the built-in writer/reviewer pair", ContentType: "application/yaml", Spec: BuiltinYAML()},
		{Name: "relay-demo", Description: "a scripted relay, once each", ContentType: "application/yaml", Spec: RelayYAML},
	}
}

// StartDemo submits the built-in pair through the server's own handler,
// as a same-origin client would.
func StartDemo(h http.Handler, token string) error {
	req := httptest.NewRequest("POST", "http://127.0.0.1/v1/pairs", strings.NewReader(BuiltinYAML()))
	req.Header.Set("Content-Type", "application/yaml")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		return errors.New("HTTP " + strconv.Itoa(rec.Code) + ": " + strings.TrimSpace(rec.Body.String()))
	}
	return nil
}
