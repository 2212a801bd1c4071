package model_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
)

func TestUsage(t *testing.T) {
	u := must(model.NewUsage(10, 5))
	require.Equal(t, int64(10), u.Input())
	require.Equal(t, int64(5), u.Output())
	require.Equal(t, int64(15), u.Total())
	v := u.Add(must(model.NewUsage(1, 2)))
	require.Equal(t, int64(11), v.Input())
	require.Equal(t, int64(7), v.Output())
	require.Equal(t, int64(10), u.Input(), "Add returns a new value")
	require.True(t, model.Usage{}.IsZero())
	require.False(t, u.IsZero())

	_, err := model.NewUsage(-1, 0)
	requireBoundError(t, err, "usage.input_tokens", bound.Malformed)
	_, err = model.NewUsage(0, -1)
	requireBoundError(t, err, "usage.output_tokens", bound.Malformed)
	require.False(t, errors.Is(err, bound.ErrExceeded))
}

// Sums saturate instead of wrapping negative, so a token budget cannot be
// fooled by overflow.
func TestUsage_AddSaturates(t *testing.T) {
	big := must(model.NewUsage(math.MaxInt64, math.MaxInt64-1))
	sum := big.Add(must(model.NewUsage(1, 5)))
	require.Equal(t, int64(math.MaxInt64), sum.Input())
	require.Equal(t, int64(math.MaxInt64), sum.Output())
	require.Equal(t, int64(math.MaxInt64), big.Total())
}
