package serve

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// startOnEmbeddedNATS runs serve with an embedded NATS server on a
// random loopback port until the test ends and returns its URL.
func startOnEmbeddedNATS(t *testing.T) string {
	cfg := config(t)
	cfg.EmbeddedNATS, cfg.NATSListen = t.TempDir(), "127.0.0.1:0"
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	cfg.Hooks.Ready = func(url string) { ready <- url }
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case url := <-ready:
		return url
	case err := <-done:
		t.Fatalf("Run ended before it listened: %v", err)
		return ""
	}
}

func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/yaml")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var e struct{ Error struct{ Code string } }
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error.Code
}

// A spec that fits the request body but not a job message is too
// large, said as such; and an ID that no pair can have is an unknown
// pair, not a failure of the server.
func TestS2_ServeOnJetStreamAnswersBadRequestsInKind(t *testing.T) {
	url := startOnEmbeddedNATS(t)
	spec := "version: 1\npattern: review\napprove: never\nworkers:\n  - role: writer\n    provider: scripted\n  - role: reviewer\n    provider: scripted\n"
	pad := "#" + strings.Repeat("x", 1<<10) + "\n"
	big := spec
	for len(big)+len(pad) < 1<<20-200 {
		big += pad
	}
	code, kind := call(t, http.MethodPost, url+"/v1/pairs", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, kind)
	require.Equal(t, "body_too_large", kind)

	for _, path := range []string{"/v1/pairs/a*b", "/v1/pairs/a%20b/events", "/v1/pairs/a:b/events.jsonl"} {
		code, kind := call(t, http.MethodGet, url+path, "")
		require.Equal(t, http.StatusNotFound, code, "%s: %s", path, kind)
	}
	code, kind = call(t, http.MethodPost, url+"/v1/pairs/%3E/cancel", "")
	require.Equal(t, http.StatusNotFound, code, kind)

	code, kind = call(t, http.MethodPost, url+"/v1/pairs", spec)
	require.Equal(t, http.StatusCreated, code, kind)
}
