package tool_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

func TestK2_CallValidation(t *testing.T) {
	cases := []struct {
		name  string
		id    string
		tool  string
		args  string
		field string
		rule  bound.Rule
	}{
		{"missing id", "", "read", "{}", "tool_call.id", bound.Required},
		{"bad id", "c 1", "read", "{}", "tool_call.id", bound.Malformed},
		{"bad name", "c1", "Read", "{}", "tool_call.name", bound.Malformed},
		{"args not JSON", "c1", "read", "{", "tool_call.arguments", bound.Malformed},
		{"args not object", "c1", "read", " [1]", "tool_call.arguments", bound.Malformed},
		{"args not UTF-8", "c1", "read", "{\"a\":\"\xff\"}", "tool_call.arguments", bound.Malformed},
		{"args too large", "c1", "read", `{"a":"` + strings.Repeat("x", bound.MaxToolArgumentsBytes) + `"}`, "tool_call.arguments", bound.TooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tool.NewCall(id.Call(tc.id), tc.tool, []byte(tc.args))
			require.True(t, c.IsZero())
			var be *bound.Error
			require.ErrorAs(t, err, &be)
			require.Equal(t, tc.field, be.Field)
			require.Equal(t, tc.rule, be.Rule)
			require.NotContains(t, err.Error(), "xxxx", "errors never quote the value")
		})
	}
	c, err := tool.NewCall("c1", "read", nil)
	require.NoError(t, err)
	require.Equal(t, "{}", c.ArgumentsString(), "empty arguments mean {}")
}

func TestK7_ResultAndProgressValidation(t *testing.T) {
	_, err := tool.NewResult("", "x")
	require.ErrorIs(t, err, bound.ErrInvalid)
	_, err = tool.NewResult("c1", strings.Repeat("x", bound.MaxToolResultBytes+1))
	require.ErrorIs(t, err, bound.ErrExceeded)
	_, err = tool.NewProblemResult("c1", problem.Problem{}, "")
	require.ErrorIs(t, err, bound.ErrInvalid, "a problem result needs a problem")
	r, err := tool.NewProblemResult("c1", prob("not_found"), "")
	require.NoError(t, err)
	p, ok := r.Problem()
	require.True(t, ok)
	require.Equal(t, "not_found", p.Code())
	_, ok = result(t, "c1", "ok").Problem()
	require.False(t, ok)

	_, err = tool.NewProgress("c1", "")
	require.ErrorIs(t, err, bound.ErrInvalid)
	_, err = tool.NewProgress("c1", strings.Repeat("p", bound.MaxProgressBytes+1))
	require.ErrorIs(t, err, bound.ErrExceeded)
}

func TestK7_ExecutionErrorConstruction(t *testing.T) {
	cases := []struct {
		name  string
		cfg   tool.ExecutionErrorConfig
		field string
		rule  bound.Rule
	}{
		{"missing call id", tool.ExecutionErrorConfig{Outcome: tool.Definitive, Problem: prob("io")}, "execution_error.call_id", bound.Required},
		{"missing outcome", tool.ExecutionErrorConfig{CallID: "c1", Problem: prob("io")}, "execution_error.outcome", bound.Required},
		{"unknown outcome", tool.ExecutionErrorConfig{CallID: "c1", Outcome: 7, Problem: prob("io")}, "execution_error.outcome", bound.Malformed},
		{"unknown retry", tool.ExecutionErrorConfig{CallID: "c1", Outcome: tool.Definitive, Retry: 7, Problem: prob("io")}, "execution_error.retry", bound.Malformed},
		{"uncertain retries", tool.ExecutionErrorConfig{CallID: "c1", Outcome: tool.Uncertain, Retry: tool.RetryAllowed, Problem: prob("io")}, "execution_error.retry", bound.Conflict},
		{"delay without retry", tool.ExecutionErrorConfig{CallID: "c1", Outcome: tool.Definitive, RetryAfter: time.Second, Problem: prob("io")}, "execution_error.retry_after", bound.Conflict},
		{"negative delay", tool.ExecutionErrorConfig{CallID: "c1", Outcome: tool.Definitive, Retry: tool.RetryAllowed, RetryAfter: -1, Problem: prob("io")}, "execution_error.retry_after", bound.Malformed},
		{"delay too long", tool.ExecutionErrorConfig{CallID: "c1", Outcome: tool.Definitive, Retry: tool.RetryAllowed, RetryAfter: tool.MaxRetryAfter + time.Second, Problem: prob("io")}, "execution_error.retry_after", bound.TooLarge},
		{"missing problem", tool.ExecutionErrorConfig{CallID: "c1", Outcome: tool.Definitive}, "execution_error.problem", bound.Required},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := tool.NewExecutionError(tc.cfg)
			require.Nil(t, e)
			var be *bound.Error
			require.ErrorAs(t, err, &be)
			require.Equal(t, tc.field, be.Field)
			require.Equal(t, tc.rule, be.Rule)
		})
	}

	e, err := tool.NewExecutionError(tool.ExecutionErrorConfig{CallID: "c1", Outcome: tool.Definitive, Retry: tool.RetryAllowed, RetryAfter: 3 * time.Second, Problem: prob("busy")})
	require.NoError(t, err)
	require.Equal(t, tool.RetryAllowed, e.Retry())
	require.Equal(t, 3*time.Second, e.RetryAfter())
	require.Equal(t, "busy", e.Problem().Code())
	require.NoError(t, e.Unwrap())

	// The helpers hand back the validation error on bad input, never panic.
	require.ErrorIs(t, tool.Fail("", prob("io")), bound.ErrInvalid)
	require.ErrorIs(t, tool.Fail("c1", problem.Problem{}), bound.ErrInvalid)
	require.ErrorIs(t, tool.Retryable("c1", prob("busy"), time.Hour), bound.ErrExceeded)
	u := executionError(t, tool.FailUncertain("c1", prob("io"), nil))
	require.Equal(t, tool.Uncertain, u.Outcome())
	require.Equal(t, tool.NoRetry, u.Retry())
}

func TestK7_ErrorTextOmitsCause(t *testing.T) {
	cause := errors.New("password=hunter2")
	err := tool.FailUncertain("call-7", prob("disk_full"), cause)
	require.ErrorIs(t, err, cause, "the cause stays reachable")
	msg := err.Error()
	require.NotContains(t, msg, "hunter2")
	require.Contains(t, msg, "call-7")
	require.Contains(t, msg, "uncertain")
	require.Contains(t, msg, "disk_full")
}

func TestK8_CancellationHelpersKeepErrorsIs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := tool.Canceled("c1", ctx.Err())
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, "canceled", executionError(t, err).Problem().Code())
	require.ErrorIs(t, tool.Canceled("c1", nil), context.Canceled)

	err = tool.Canceled("c1", context.DeadlineExceeded)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, context.Canceled)
	require.Equal(t, "deadline_exceeded", executionError(t, err).Problem().Code())

	err = tool.FailUncertain("c1", prob("interrupted"), context.Canceled)
	require.ErrorIs(t, err, context.Canceled)
}
