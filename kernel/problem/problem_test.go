package problem_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

func TestNewValidates(t *testing.T) {
	p, err := problem.New("rate_limited", "try later")
	require.NoError(t, err)
	require.Equal(t, "rate_limited", p.Code())
	require.Equal(t, "try later", p.Message())
	require.Equal(t, "rate_limited: try later", p.String())
	require.False(t, p.IsZero())
	require.True(t, problem.Problem{}.IsZero())

	_, err = problem.New("", "x")
	require.ErrorIs(t, err, bound.ErrInvalid)
	_, err = problem.New("Bad Code", "x")
	require.ErrorIs(t, err, bound.ErrInvalid)
}

func TestK2_ProblemMessageBound(t *testing.T) {
	_, err := problem.New("c", strings.Repeat("m", bound.MaxProblemBytes))
	require.NoError(t, err)
	_, err = problem.New("c", strings.Repeat("m", bound.MaxProblemBytes+1))
	require.ErrorIs(t, err, bound.ErrExceeded)
}
