package model_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

func TestK23_ProviderErrorIsTypedAndSecretFree(t *testing.T) {
	p := problem.Must("rate_limited", "too many requests")
	cause := fmt.Errorf("POST https://api.example/v1?key=sk-secret-123: %w", context.DeadlineExceeded)
	perr, err := model.NewProviderError(model.ProviderErrorConfig{
		Problem: p, Retryable: true, RetryAfter: 2 * time.Second, Cause: cause,
	})
	require.NoError(t, err)
	var asErr error = perr
	var got *model.ProviderError
	require.ErrorAs(t, asErr, &got)
	require.Equal(t, p, got.Problem())
	require.True(t, got.Retryable())
	require.Equal(t, 2*time.Second, got.RetryAfter())
	require.ErrorIs(t, asErr, context.DeadlineExceeded, "the cause keeps errors.Is semantics")
	require.Equal(t, "model provider: rate_limited: too many requests (retryable after 2s)", perr.Error())
	require.NotContains(t, perr.Error(), "sk-secret")

	plain, err := model.NewProviderError(model.ProviderErrorConfig{Problem: p})
	require.NoError(t, err)
	require.False(t, plain.Retryable())
	require.Nil(t, plain.Unwrap())
	require.Equal(t, "model provider: rate_limited: too many requests", plain.Error())
	retry, err := model.NewProviderError(model.ProviderErrorConfig{Problem: p, Retryable: true})
	require.NoError(t, err)
	require.Equal(t, "model provider: rate_limited: too many requests (retryable)", retry.Error())
}

func TestK2_ProviderErrorRetryAdviceIsBounded(t *testing.T) {
	p := problem.Must("overloaded", "")
	_, err := model.NewProviderError(model.ProviderErrorConfig{Problem: p, Retryable: true, RetryAfter: model.MaxRetryAfter})
	require.NoError(t, err)
	_, err = model.NewProviderError(model.ProviderErrorConfig{Problem: p, Retryable: true, RetryAfter: model.MaxRetryAfter + time.Millisecond})
	be := requireBoundError(t, err, "provider_error.retry_after", bound.TooLarge)
	require.Equal(t, int(model.MaxRetryAfter/time.Millisecond), be.Limit)

	_, err = model.NewProviderError(model.ProviderErrorConfig{Problem: p, Retryable: true, RetryAfter: -time.Second})
	requireBoundError(t, err, "provider_error.retry_after", bound.Malformed)
	_, err = model.NewProviderError(model.ProviderErrorConfig{Problem: p, RetryAfter: time.Second})
	requireBoundError(t, err, "provider_error.retry_after", bound.Conflict)
	perr, err := model.NewProviderError(model.ProviderErrorConfig{Cause: errors.New("x")})
	requireBoundError(t, err, "provider_error.problem", bound.Required)
	require.Nil(t, perr)
}
