package openai_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/providers/openai"
)

// TestD3_TheProviderDescribesItselfForTelemetry: the provider says its
// gen_ai.provider.name, the host and port its requests go to (never the
// path, the query or user information of the base URL), and its request
// parameters.
func TestD3_TheProviderDescribesItselfForTelemetry(t *testing.T) {
	temp := 0.3
	for _, c := range []struct {
		cfg       openai.Config
		host      string
		port      int
		temp      float64
		hasTemp   bool
		maxTokens int64
	}{
		{openai.Config{APIKey: testKey}, "api.openai.com", 443, 0, false, 0},
		{openai.Config{BaseURL: "http://127.0.0.1:8000/v1", Temperature: &temp, MaxOutputTokens: 800}, "127.0.0.1", 8000, 0.3, true, 800},
		{openai.Config{BaseURL: "http://[::1]/v1"}, "::1", 80, 0, false, 0},
	} {
		p, err := openai.New(c.cfg)
		require.NoError(t, err)
		require.Equal(t, "openai", p.ProviderName())
		host, port := p.ServerAddress()
		require.Equal(t, c.host, host)
		require.Equal(t, c.port, port)
		temp, ok, maxTokens := p.RequestParams()
		require.Equal(t, c.temp, temp)
		require.Equal(t, c.hasTemp, ok)
		require.Equal(t, c.maxTokens, maxTokens)
	}
}
