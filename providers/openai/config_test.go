package openai_test

import (
	"errors"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/providers/openai"
)

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{"OPENAI_API_KEY": testKey, "OPENAI_BASE_URL": "http://localhost:11434/v1", "OPENAI_ORG_ID": "org-x"}
	cfg := openai.ConfigFromEnv(func(k string) string { return env[k] })
	require.Equal(t, openai.Config{APIKey: testKey, BaseURL: "http://localhost:11434/v1"}, cfg)
	require.Equal(t, openai.Config{}, openai.ConfigFromEnv(func(string) string { return "" }))
	require.Equal(t, openai.Config{}, openai.ConfigFromEnv(nil))
}

func TestNewIgnoresTheProcessEnvironment(t *testing.T) {
	// New reads only its Config: the client library's OPENAI_* defaults
	// would otherwise add a base URL or headers behind the caller's back.
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_API_KEY", "sk-from-env-should-not-be-used")
	_, err := openai.New(openai.Config{})
	require.ErrorIs(t, err, bound.ErrInvalid, "no key configured means no key, whatever the environment says")

	r := newReplay(t, transcript(t, "text.http"))
	p, _ := r.provider(t)
	s, err := p.Stream(t.Context(), request(t))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Equal(t, "Bearer "+testKey, r.request(0).header.Get("Authorization"))
}

func TestNewValidates(t *testing.T) {
	neg := -0.5
	nan := math.NaN()
	hot := 2.5
	for _, tc := range []struct {
		name  string
		cfg   openai.Config
		field string
		rule  bound.Rule
	}{
		{"key required for OpenAI", openai.Config{}, "openai.api_key", bound.Required},
		{"relative base URL", openai.Config{BaseURL: "localhost:8000/v1"}, "openai.base_url", bound.Malformed},
		{"ftp base URL", openai.Config{BaseURL: "ftp://example.com/v1"}, "openai.base_url", bound.Malformed},
		{"key with newline", openai.Config{APIKey: "sk-abc\r\nX-Evil: 1"}, "openai.api_key", bound.Malformed},
		{"negative timeout", openai.Config{APIKey: "k", Timeout: -time.Second}, "openai.timeout", bound.Malformed},
		{"negative temperature", openai.Config{APIKey: "k", Temperature: &neg}, "openai.temperature", bound.Malformed},
		{"NaN temperature", openai.Config{APIKey: "k", Temperature: &nan}, "openai.temperature", bound.Malformed},
		{"hot temperature", openai.Config{APIKey: "k", Temperature: &hot}, "openai.temperature", bound.Malformed},
		{"negative max tokens", openai.Config{APIKey: "k", MaxOutputTokens: -1}, "openai.max_output_tokens", bound.Malformed},
		{"too many attempts", openai.Config{APIKey: "k", MaxAttempts: openai.MaxAttemptsLimit + 1}, "openai.max_attempts", bound.TooMany},
		{"negative attempts", openai.Config{APIKey: "k", MaxAttempts: -1}, "openai.max_attempts", bound.Malformed},
		{"long retry wait", openai.Config{APIKey: "k", MaxRetryWait: model.MaxRetryAfter + time.Second}, "openai.max_retry_wait", bound.TooLarge},
		{"negative byte limit", openai.Config{APIKey: "k", MaxResponseBytes: -1}, "openai.max_response_bytes", bound.Malformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := openai.New(tc.cfg)
			require.Nil(t, p)
			var be *bound.Error
			require.True(t, errors.As(err, &be), "%T %v", err, err)
			require.Equal(t, tc.field, be.Field)
			require.Equal(t, tc.rule, be.Rule)
			require.NotContains(t, err.Error(), "sk-abc", "errors never quote the value")
		})
	}
	// A compatible server needs no key; 0 and 2 are valid temperatures.
	zero, two := 0.0, 2.0
	_, err := openai.New(openai.Config{BaseURL: "http://localhost:8000/v1", Temperature: &zero})
	require.NoError(t, err)
	_, err = openai.New(openai.Config{APIKey: "k", Temperature: &two, HTTPClient: &http.Client{}})
	require.NoError(t, err)
}
