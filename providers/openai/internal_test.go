package openai

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/model"
)

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2025, 3, 10, 1, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"none", http.Header{}, 0},
		{"seconds", http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{"fractional seconds", http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{"milliseconds first", http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond},
		{"http date", http.Header{"Retry-After": {now.Add(30 * time.Second).Format(http.TimeFormat)}}, 30 * time.Second},
		{"date in the past", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"capped", http.Header{"Retry-After": {"86400"}}, model.MaxRetryAfter},
		{"huge", http.Header{"Retry-After": {"1e300"}}, model.MaxRetryAfter},
		{"negative", http.Header{"Retry-After": {"-5"}}, 0},
		{"NaN", http.Header{"Retry-After": {"NaN"}}, 0},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0},
		{"bad ms falls back", http.Header{"Retry-After-Ms": {"x"}, "Retry-After": {"3"}}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, retryAfter(tc.header, now))
		})
	}
}

func TestBackoffIsBoundedAndJittered(t *testing.T) {
	for n := 1; n <= MaxAttemptsLimit; n++ {
		step := min(500*time.Millisecond<<min(n-1, 4), 8*time.Second)
		for range 50 {
			d := backoff(n, DefaultMaxRetryWait)
			require.GreaterOrEqual(t, d, step/2)
			require.LessOrEqual(t, d, step)
		}
	}
	require.LessOrEqual(t, backoff(5, time.Second), time.Second, "MaxRetryWait caps the step")
}

func TestSanitizeBoundsAndCleans(t *testing.T) {
	p := &Provider{s: settings{apiKey: "sk-live-0123456789", redact: newRedactor("sk-live-0123456789")}}
	long := make([]byte, 0, 3*maxServerMessage)
	for len(long) < 2*maxServerMessage {
		long = append(long, "é"...)
	}
	got := p.sanitize(string(long))
	require.LessOrEqual(t, len(got), maxServerMessage+len("…"))
	require.True(t, len(got) > maxServerMessage/2)
	require.Equal(t, "key [redacted] tab line", p.sanitize("key sk-live-0123456789\ttab\nline"))
	require.Equal(t, "bad \uFFFD", p.sanitize("bad \xff"))
}

// A server that echoes the key with its case changed does not leak it.
func TestSanitizeRedactsTheKeyInAnyCase(t *testing.T) {
	p := &Provider{s: settings{apiKey: "sk-live-0123456789abc", redact: newRedactor("sk-live-0123456789abc")}}
	require.Equal(t, "bad key [redacted], [redacted] and [redacted]",
		p.sanitize("bad key SK-LIVE-0123456789ABC, Sk-Live-0123456789aBc and sk-live-0123456789abc"))
	require.Equal(t, "no key here: sk-live-0123", p.sanitize("no key here: sk-live-0123"))
}
