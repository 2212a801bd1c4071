package handoff_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/handoff"
	"github.com/spice-orch/spice-orch/kernel/bound"
)

// At the bound exactly, a handoff is taken whole; one byte over, it is
// rejected (Reject) or cut with the marker (Cut).
func TestO3_HandoffAtTheBoundAndOneByteOver(t *testing.T) {
	const max = 200
	// The frame is what the policy puts around an answer: the task and
	// the headings.
	probe, err := policy(t, handoff.Config{MaxBytes: max}).Build(input(t, "x"))
	require.NoError(t, err)
	frame := probe.Provenance().Bytes - 1
	at := strings.Repeat("a", max-frame)
	over := at + "b"

	for _, over0 := range []handoff.Over{handoff.Reject, handoff.Cut} {
		p := policy(t, handoff.Config{MaxBytes: max, Over: over0})
		h, err := p.Build(input(t, at))
		require.NoError(t, err, "exactly at the bound")
		require.Equal(t, max, h.Provenance().Bytes)
		require.False(t, h.Provenance().Cut)
		require.True(t, strings.HasSuffix(h.Message().Text(), at), "taken whole")
	}

	_, err = policy(t, handoff.Config{MaxBytes: max, Over: handoff.Reject}).Build(input(t, over))
	var be *bound.Error
	require.ErrorAs(t, err, &be, "one byte over is rejected")
	require.Equal(t, max, be.Limit)
	require.Equal(t, max+1, be.Got)

	h, err := policy(t, handoff.Config{MaxBytes: max, Over: handoff.Cut}).Build(input(t, over))
	require.NoError(t, err)
	require.True(t, h.Provenance().Cut, "one byte over is cut")
	require.LessOrEqual(t, h.Provenance().Bytes, max)
	require.True(t, strings.HasSuffix(h.Message().Text(), handoff.CutMarker))
	require.Equal(t, max+1-frame, h.Provenance().AnswerBytes)
}
