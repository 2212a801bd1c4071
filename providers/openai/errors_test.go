package openai_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/providers/openai"
)

// apiError asserts the cause of pe is an *openai.APIError.
func apiError(t *testing.T, pe *model.ProviderError) *openai.APIError {
	t.Helper()
	var ae *openai.APIError
	require.True(t, errors.As(pe, &ae), "cause %T", errors.Unwrap(pe))
	return ae
}

func TestUnauthorizedIsNotRetried(t *testing.T) {
	r := newReplay(t, transcript(t, "error_401.http"))
	p, sl := r.provider(t)
	s, err := p.Stream(context.Background(), request(t))
	require.Nil(t, s)
	pe := providerError(t, err)
	require.Equal(t, "unauthorized", pe.Problem().Code())
	require.Equal(t, "the server answered HTTP 401 Unauthorized (invalid_request_error/invalid_api_key): "+
		"Incorrect API key provided: [redacted]. You can find your API key at https://platform.openai.com/account/api-keys.",
		pe.Problem().Message())
	require.False(t, pe.Retryable())
	require.Zero(t, pe.RetryAfter())
	require.Equal(t, &openai.APIError{StatusCode: 401, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "Incorrect API key provided: [redacted]. You can find your API key at https://platform.openai.com/account/api-keys."},
		apiError(t, pe))
	require.Equal(t, 1, r.count())
	require.Empty(t, sl.waits())
}

func TestRateLimitWithRetryAfterThenSuccess(t *testing.T) {
	r := newReplay(t, transcript(t, "error_429.http"), transcript(t, "text.http"))
	p, sl := r.provider(t)
	s, err := p.Stream(context.Background(), request(t))
	require.NoError(t, err)
	items, err := drain(t, s)
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		text("Hello"), text(","), text(" world"), text("!"),
		completed(19, 4, `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","model":"gpt-4o-mini-2024-07-18","finish_reason":"stop"}`),
	}, items)
	require.Equal(t, []time.Duration{2 * time.Second}, sl.waits(), "Retry-After: 2 is honoured exactly")
	require.Equal(t, 2, r.count())
	require.Equal(t, r.request(0).body, r.request(1).body, "the retry sends the same request")
}

func TestRateLimitAdviceBeyondMaxRetryWaitIsReturned(t *testing.T) {
	r := newReplay(t, transcript(t, "error_429_long.http"), transcript(t, "text.http"))
	p, sl := r.provider(t)
	_, err := p.Stream(context.Background(), request(t))
	pe := providerError(t, err)
	require.Equal(t, "rate_limited", pe.Problem().Code())
	require.True(t, pe.Retryable())
	require.Equal(t, 120*time.Second, pe.RetryAfter(), "the caller gets the server's advice")
	require.Empty(t, sl.waits(), "the provider does not wait longer than MaxRetryWait")
	require.Equal(t, 1, r.count())
}

func TestInsufficientQuotaIsNotRetried(t *testing.T) {
	r := newReplay(t, transcript(t, "error_429_quota.http"))
	p, _ := r.provider(t)
	_, err := p.Stream(context.Background(), request(t))
	pe := providerError(t, err)
	require.Equal(t, "quota_exceeded", pe.Problem().Code())
	require.False(t, pe.Retryable())
	require.Equal(t, 1, r.count())
}

func TestServerErrorsRetryWithBackoffUntilMaxAttempts(t *testing.T) {
	r := newReplay(t, transcript(t, "error_503.http"))
	p, sl := r.provider(t)
	_, err := p.Stream(context.Background(), request(t))
	pe := providerError(t, err)
	require.Equal(t, "server_error", pe.Problem().Code())
	require.True(t, pe.Retryable(), "the last error keeps its advice for the caller")
	require.Equal(t, openai.DefaultMaxAttempts, r.count())
	w := sl.waits()
	require.Len(t, w, openai.DefaultMaxAttempts-1)
	// Equal jitter: half the exponential step plus up to another half.
	require.GreaterOrEqual(t, w[0], 250*time.Millisecond)
	require.LessOrEqual(t, w[0], 500*time.Millisecond)
	require.GreaterOrEqual(t, w[1], 500*time.Millisecond)
	require.LessOrEqual(t, w[1], time.Second)
}

func TestMaxAttemptsOneTurnsRetriesOff(t *testing.T) {
	r := newReplay(t, transcript(t, "error_503.http"), transcript(t, "text.http"))
	p, sl := r.provider(t, func(c *openai.Config) { c.MaxAttempts = 1 })
	_, err := p.Stream(context.Background(), request(t))
	require.Equal(t, "server_error", providerError(t, err).Problem().Code())
	require.Equal(t, 1, r.count())
	require.Empty(t, sl.waits())
}

func TestBadRequestCarriesTheServerMessage(t *testing.T) {
	r := newReplay(t, transcript(t, "error_400_context.http"))
	p, _ := r.provider(t)
	_, err := p.Stream(context.Background(), request(t))
	pe := providerError(t, err)
	require.Equal(t, "bad_request", pe.Problem().Code())
	require.False(t, pe.Retryable())
	require.Contains(t, pe.Problem().Message(), "(invalid_request_error/context_length_exceeded): This model's maximum context length")
}

func TestStatusClassification(t *testing.T) {
	for _, tc := range []struct {
		status    int
		code      string
		retryable bool
	}{
		{400, "bad_request", false}, {401, "unauthorized", false}, {403, "forbidden", false},
		{404, "not_found", false}, {408, "request_timeout", true}, {409, "conflict", true},
		{413, "request_too_large", false}, {418, "http_error", false}, {422, "unprocessable", false},
		{429, "rate_limited", true}, {500, "server_error", true}, {502, "server_error", true},
		{503, "server_error", true}, {504, "server_error", true},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			r := newReplay(t, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte("<html>not json</html>"))
			})
			p, _ := r.provider(t, func(c *openai.Config) { c.MaxAttempts = 1 })
			_, err := p.Stream(context.Background(), request(t))
			pe := providerError(t, err)
			require.Equal(t, tc.code, pe.Problem().Code())
			require.Equal(t, tc.retryable, pe.Retryable())
			require.Equal(t, tc.status, apiError(t, pe).StatusCode)
		})
	}
}

func TestConnectionResetBeforeFirstChunkIsRetried(t *testing.T) {
	r := newReplay(t, resetConnection, transcript(t, "text.http"))
	p, sl := r.provider(t)
	s, err := p.Stream(context.Background(), request(t))
	require.NoError(t, err)
	items, err := drain(t, s)
	require.NoError(t, err)
	require.Len(t, items, 5)
	require.Equal(t, 2, r.count())
	require.Len(t, sl.waits(), 1)
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	r := newReplay(t, transcript(t, "text.http"))
	p, _ := r.provider(t, func(c *openai.Config) { c.MaxAttempts = 1 })
	r.srv.Close()
	_, err := p.Stream(context.Background(), request(t))
	pe := providerError(t, err)
	require.Equal(t, "connection_failed", pe.Problem().Code())
	require.True(t, pe.Retryable())
}

func TestErrorEventBeforeFirstChunkIsAProviderError(t *testing.T) {
	// OpenRouter: HTTP 200, then an error event carrying the upstream status.
	r := newReplay(t, transcript(t, "error_event_first.http"), transcript(t, "text.http"))
	p, _ := r.provider(t, func(c *openai.Config) { c.MaxAttempts = 1 })
	_, err := p.Stream(context.Background(), request(t))
	pe := providerError(t, err)
	require.Equal(t, "server_error", pe.Problem().Code())
	require.True(t, pe.Retryable())
	require.Equal(t, &openai.APIError{StatusCode: 502, Code: "502", Message: "Provider returned error"}, apiError(t, pe))
}

func TestMalformedFirstChunkIsNotRetried(t *testing.T) {
	r := newReplay(t, transcript(t, "malformed_first_chunk.http"))
	p, _ := r.provider(t)
	_, err := p.Stream(context.Background(), request(t))
	pe := providerError(t, err)
	require.Equal(t, "malformed_response", pe.Problem().Code())
	require.False(t, pe.Retryable())
	require.Equal(t, 1, r.count())
}

func TestEmptyStreamIsAProviderError(t *testing.T) {
	r := newReplay(t, sseBody("[DONE]"))
	p, _ := r.provider(t)
	_, err := p.Stream(context.Background(), request(t))
	pe := providerError(t, err)
	require.Equal(t, "empty_stream", pe.Problem().Code())
	require.Equal(t, "the stream ended before its first chunk", pe.Problem().Message())
	require.False(t, pe.Retryable())

	// A server that ignores "stream": true and answers with one JSON object.
	r = newReplay(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`))
	})
	p, _ = r.provider(t)
	_, err = p.Stream(context.Background(), request(t))
	pe = providerError(t, err)
	require.Equal(t, "empty_stream", pe.Problem().Code())
	require.Equal(t, `the stream ended before its first chunk; the response is not an event stream (Content-Type "application/json")`,
		pe.Problem().Message())
}

func TestTimeoutBeforeFirstChunk(t *testing.T) {
	r := newReplay(t, holdBeforeHeaders)
	p, _ := r.provider(t, func(c *openai.Config) { c.Timeout = 50 * time.Millisecond; c.MaxAttempts = 1 })
	_, err := p.Stream(context.Background(), request(t))
	pe := providerError(t, err)
	require.Equal(t, "timeout", pe.Problem().Code())
	require.True(t, pe.Retryable())
	require.ErrorIs(t, err, openai.ErrTimeout)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "not to be mistaken for the caller's deadline")
}

func TestTimeoutWhileStreaming(t *testing.T) {
	r := newReplay(t, slowTranscript(t, "slow.http"))
	p, _ := r.provider(t, func(c *openai.Config) { c.Timeout = 100 * time.Millisecond })
	s, err := p.Stream(context.Background(), request(t))
	require.NoError(t, err)
	items, err := drain(t, s)
	require.NoError(t, err)
	require.Equal(t, []model.Item{text("Thinking"), failed("timeout", "the stream did not end within 100ms")}, items)
}
