package openai_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/providers/openai"
)

// A timeout after retries says how many attempts were made.
func TestTimeoutAfterRetriesSaysHowManyAttempts(t *testing.T) {
	r := newReplay(t, holdBeforeHeaders, holdBeforeHeaders, holdBeforeHeaders)
	p, _ := r.provider(t, func(c *openai.Config) { c.Timeout = 30 * time.Millisecond })
	_, err := p.Stream(context.Background(), request(t))
	pe := providerError(t, err)
	require.Equal(t, "timeout", pe.Problem().Code())
	require.Contains(t, pe.Problem().Message(), "(after 3 attempts)")
	require.ErrorIs(t, err, openai.ErrTimeout, "the cause is kept")
}

// The retried server error says so too.
func TestServerErrorAfterRetriesSaysHowManyAttempts(t *testing.T) {
	r := newReplay(t, transcript(t, "error_503.http"))
	p, _ := r.provider(t)
	_, err := p.Stream(context.Background(), request(t))
	require.Contains(t, providerError(t, err).Problem().Message(), "(after 3 attempts)")
}
