package openai_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/providers/openai"
)

// requireNoKey fails if the test key appears in any rendering of v.
func requireNoKey(t *testing.T, what string, v any) {
	t.Helper()
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		require.NotContains(t, fmt.Sprintf(format, v), testKey, "%s printed with %s", what, format)
	}
}

// requireNoKeyInError walks the whole chain of err.
func requireNoKeyInError(t *testing.T, err error) {
	t.Helper()
	for e := err; e != nil; e = errors.Unwrap(e) {
		require.NotContains(t, e.Error(), testKey)
		requireNoKey(t, fmt.Sprintf("error %T", e), e)
	}
}

func requireNoKeyInItems(t *testing.T, items []model.Item) {
	t.Helper()
	for _, it := range items {
		require.NotContains(t, it.Text(), testKey)
		p, _ := it.Problem()
		require.NotContains(t, p.String(), testKey)
		require.NotContains(t, it.Metadata().JSONString(), testKey)
		requireNoKey(t, "item", it)
	}
}

func TestAPIKeyNeverLeaks(t *testing.T) {
	leak := func(w http.ResponseWriter, _ *http.Request) { // a server that echoes the key everywhere
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Retry-After", "1")
		_, _ = fmt.Fprintf(w, "data: {\"id\":\"%s\",\"model\":\"%s\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n", testKey, testKey)
		_, _ = fmt.Fprintf(w, "data: {\"error\":{\"message\":\"bad key %s\",\"type\":\"%s\",\"code\":\"%s\"}}\n\n", testKey, testKey, testKey)
	}
	status := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","type":"%s","code":"%s"}}`, testKey, testKey, testKey)
		}
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	for name, h := range map[string]http.HandlerFunc{
		"401":          transcript(t, "error_401.http"),
		"403 echo":     status(403),
		"429 echo":     status(429),
		"500 echo":     status(500),
		"event echo":   leak,
		"error first":  sseBody(`{"error":{"message":"` + testKey + `","code":502}}`),
		"success":      transcript(t, "text.http"),
		"stream error": transcript(t, "error_after_chunks.http"),
	} {
		t.Run(name, func(t *testing.T) {
			r := newReplay(t, h)
			p, _ := r.provider(t)
			requireNoKey(t, "provider", p)
			s, err := p.Stream(context.Background(), request(t))
			log.Info("stream", "provider", p, "err", err)
			if err != nil {
				requireNoKeyInError(t, err)
				var pe *model.ProviderError
				require.True(t, errors.As(err, &pe))
				require.NotContains(t, pe.Problem().Message(), testKey)
				return
			}
			items, err := drain(t, s)
			require.NoError(t, err)
			requireNoKeyInItems(t, items)
			require.Equal(t, "Bearer "+testKey, r.request(0).header.Get("Authorization"), "the key goes only where it belongs")
		})
	}

	cfg := openai.Config{APIKey: testKey, BaseURL: "https://user:hunter2@example.com/v1"}
	requireNoKey(t, "config", cfg)
	requireNoKey(t, "config pointer", &cfg)
	require.NotContains(t, cfg.String(), "hunter2")
	log.Info("config", "cfg", cfg)
	require.NotContains(t, logs.String(), testKey)
	require.True(t, strings.Contains(logs.String(), "APIKey: [redacted]"), logs.String())
}
