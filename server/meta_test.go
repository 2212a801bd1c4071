package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/server"
)

// TestS2_TheHostsRedactionCoversEverythingShownOfASubmission: the pair
// resource carries the spec Built.Spec gave, and Built.Redact applies to
// it, the task and the name; a spec the redaction leaves as no JSON is
// not shown, nor is anything when the redaction panics.
func TestS2_TheHostsRedactionCoversEverythingShownOfASubmission(t *testing.T) {
	const secret = "s3cr3t-value"
	var h *harness
	redact := func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") }
	mode := "ok"
	h = newHarness(t, options{mutate: func(c *server.Config) {
		c.Build = func(ctx context.Context, req server.BuildRequest) (server.Built, error) {
			b, err := h.build(ctx, req)
			b.Name = "name " + secret
			b.Spec = json.RawMessage(`{"system":"use ` + secret + `"}`)
			switch mode {
			case "ok":
				b.Redact = redact
			case "breaks json":
				b.Redact = func(s string) string { return strings.ReplaceAll(redact(s), "}", "") }
			case "panics":
				b.Redact = func(string) string { panic("no") }
			}
			return b, err
		}
	}})
	get := func(pairID string) string {
		r := h.do("GET", "/v1/pairs/"+pairID, "", "")
		require.Equal(t, http.StatusOK, r.status)
		return string(r.body)
	}
	id := h.submit(testSpec{First: []string{"a"}, Second: []string{"b"}})
	body := get(id)
	require.NotContains(t, body, secret)
	require.Contains(t, body, `"spec":{"system":"use [redacted]"}`)
	require.Contains(t, body, `"name":"name [redacted]"`)

	mode = "breaks json"
	id = h.submit(testSpec{First: []string{"a"}, Second: []string{"b"}})
	body = get(id)
	require.NotContains(t, body, secret)
	require.NotContains(t, body, `"spec"`)
	require.Contains(t, body, `"name":"name [redacted]"`)

	mode = "panics"
	id = h.submit(testSpec{First: []string{"a"}, Second: []string{"b"}})
	body = get(id)
	require.NotContains(t, body, secret)
	require.NotContains(t, body, `"spec"`)
	require.NotContains(t, body, `"name"`)
}
