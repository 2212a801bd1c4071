package openai_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/providers/openai"
)

// echoedKey is what a server learns of the key: the bearer token of the
// request it answers.
func echoedKey(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// streamText answers with the texts as separate content chunks.
func streamText(texts func(key string) []string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, t := range texts(echoedKey(r)) {
			b, _ := json.Marshal(t)
			_, _ = fmt.Fprintf(w, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%s}}]}\n\n", b)
			w.(http.Flusher).Flush()
		}
		_, _ = fmt.Fprint(w, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}
}

func streamedText(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	r := newReplay(t, h)
	p, _ := r.provider(t)
	s, err := p.Stream(context.Background(), request(t))
	require.NoError(t, err)
	items, err := drain(t, s)
	require.NoError(t, err)
	requireNoKeyInItems(t, items)
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it.Text())
	}
	return b.String()
}

// A server that streams the key back, whole or split over chunks at any
// byte, in any case, never gets it into an item; the text around it is
// kept.
func TestAPIKeyIsRedactedFromStreamedTextAcrossChunks(t *testing.T) {
	got := streamedText(t, streamText(func(k string) []string { return []string{"before " + k + " after"} }))
	require.Equal(t, "before [redacted] after", got)

	got = streamedText(t, streamText(func(k string) []string {
		return []string{"upper " + strings.ToUpper(k) + " done"}
	}))
	require.Equal(t, "upper [redacted] done", got)

	for cut := 1; cut < len(testKey); cut++ {
		got := streamedText(t, streamText(func(k string) []string {
			return []string{"a " + k[:cut], k[cut:] + " b"}
		}))
		require.Equal(t, "a [redacted] b", got, "split at %d", cut)
	}
	// One byte a chunk.
	got = streamedText(t, streamText(func(k string) []string {
		return strings.Split("x"+k+"y", "")
	}))
	require.Equal(t, "x[redacted]y", got)
	// Text that only starts like the key is kept whole.
	got = streamedText(t, streamText(func(k string) []string { return []string{"see " + k[:5], "and more"} }))
	require.Equal(t, "see "+testKey[:5]+"and more", got)
}

// encodings are the forms a server may echo the key in.
var encodings = map[string]func(string) string{
	"plain":            func(k string) string { return k },
	"base64":           func(k string) string { return base64.StdEncoding.EncodeToString([]byte(k)) },
	"base64 raw":       func(k string) string { return base64.RawStdEncoding.EncodeToString([]byte(k)) },
	"base64url":        func(k string) string { return base64.URLEncoding.EncodeToString([]byte(k)) },
	"base64url raw":    func(k string) string { return base64.RawURLEncoding.EncodeToString([]byte(k)) },
	"base64 of header": func(k string) string { return base64.StdEncoding.EncodeToString([]byte("Bearer " + k)) },
	"base64 shifted":   func(k string) string { return base64.StdEncoding.EncodeToString([]byte("x" + k + "yz")) },
	"hex":              func(k string) string { return hex.EncodeToString([]byte(k)) },
	"HEX":              func(k string) string { return strings.ToUpper(hex.EncodeToString([]byte(k))) },
	"query escaped":    func(k string) string { return url.QueryEscape(k) },
	"percent every byte": func(k string) string {
		var b strings.Builder
		for i := range len(k) {
			fmt.Fprintf(&b, "%%%02X", k[i])
		}
		return b.String()
	},
}

// A server that quotes the key in an encoded form, in an error's message,
// type or code, over an HTTP error or an error event, never gets it into
// an error or an item.
func TestAPIKeyIsRedactedInEncodedFormsInErrors(t *testing.T) {
	for name, enc := range encodings {
		t.Run(name, func(t *testing.T) {
			sent := enc(testKey)
			// What the server wrote must not be found, nor any 8-byte
			// run of it that only the key determines.
			requireGone := func(what, s string) {
				t.Helper()
				require.NotContains(t, strings.ToLower(s), strings.ToLower(sent), "%s: %s", what, s)
				require.Contains(t, s, "[redacted]", "%s", what)
			}
			status := func(w http.ResponseWriter, r *http.Request) {
				e := enc(echoedKey(r))
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = fmt.Fprintf(w, `{"error":{"message":"bad key %s","type":"t-%s","code":"c-%s"}}`, e, e, e)
			}
			r := newReplay(t, status)
			p, _ := r.provider(t)
			_, err := p.Stream(context.Background(), request(t))
			require.Error(t, err)
			var pe *model.ProviderError
			require.True(t, errors.As(err, &pe))
			requireGone("problem", pe.Problem().Message())
			for e := err; e != nil; e = errors.Unwrap(e) {
				requireGone(fmt.Sprintf("error %T", e), e.Error())
			}
			var ae *openai.APIError
			if errors.As(err, &ae) {
				requireGone("code", ae.Code)
				requireGone("type", ae.Type)
			}

			event := func(w http.ResponseWriter, r *http.Request) {
				e := enc(echoedKey(r))
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = fmt.Fprint(w, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n")
				_, _ = fmt.Fprintf(w, "data: {\"error\":{\"message\":\"m %s\",\"type\":\"%s\",\"code\":\"%s\"}}\n\n", e, e, e)
			}
			r = newReplay(t, event)
			p, _ = r.provider(t)
			s, err := p.Stream(context.Background(), request(t))
			require.NoError(t, err)
			items, err := drain(t, s)
			require.NoError(t, err)
			last := items[len(items)-1]
			prob, ok := last.Problem()
			require.True(t, ok)
			requireGone("stream problem", prob.String())
		})
	}
}

// A base_url with a query string or a fragment is refused, not silently
// cut: whatever it carried would not reach the server.
func TestBaseURLWithAQueryIsRefused(t *testing.T) {
	for _, u := range []string{"https://example.com/v1?api-version=1", "https://example.com/v1?", "https://example.com/v1#x"} {
		_, err := openai.New(openai.Config{APIKey: testKey, BaseURL: u})
		require.ErrorIs(t, err, bound.ErrInvalid, u)
		require.Contains(t, err.Error(), "openai.base_url", u)
	}
}
