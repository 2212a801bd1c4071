package bound_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

func TestK2_ExceedingALimitIsTypedNeverTruncated(t *testing.T) {
	require.NoError(t, bound.Bytes("f", 10, 10))
	err := bound.Bytes("message.text", 11, 10)
	var be *bound.Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, bound.Error{Field: "message.text", Rule: bound.TooLarge, Limit: 10, Got: 11}, *be)
	require.ErrorIs(t, err, bound.ErrInvalid)
	require.ErrorIs(t, err, bound.ErrExceeded)
	require.Equal(t, "message.text: too large (11 > limit 10)", err.Error())

	err = bound.Count("message.parts", 65, 64)
	require.ErrorIs(t, err, bound.ErrExceeded)
	require.ErrorAs(t, err, &be)
	require.Equal(t, bound.TooMany, be.Rule)
}

func TestK2_ValidationErrorsNameTheFieldNotTheValue(t *testing.T) {
	secret := "sk-very-secret-value"
	for _, err := range []error{
		bound.Text("x.prompt", "\xff"+secret, 100),
		bound.Name("tool.name", "Bad "+secret),
		bound.Text("x.prompt", "", 100),
	} {
		require.Error(t, err)
		require.ErrorIs(t, err, bound.ErrInvalid)
		require.NotErrorIs(t, err, bound.ErrExceeded)
		require.NotContains(t, err.Error(), secret)
		require.True(t, strings.HasPrefix(err.Error(), "x.prompt") || strings.HasPrefix(err.Error(), "tool.name"))
	}
}

func TestName(t *testing.T) {
	for _, ok := range []string{"a", "fs.read", "text_stats", "a-1", strings.Repeat("a", bound.MaxNameBytes)} {
		require.NoError(t, bound.Name("n", ok), ok)
	}
	for _, bad := range []string{"", "1a", "A", "a b", "a/b", strings.Repeat("a", bound.MaxNameBytes+1)} {
		err := bound.Name("n", bad)
		require.Error(t, err, bad)
		require.True(t, errors.Is(err, bound.ErrInvalid))
	}
}
