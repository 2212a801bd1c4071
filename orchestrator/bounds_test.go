package orchestrator_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// A model operation that spends exactly the token budget, inside a run,
// leaves none for the next operation of that run: "used this many" is
// reached at the bound, not past it.
func TestO5_BudgetTokensSpentExactlyInsideARunRefusesTheNextModelOperation(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, toolThenAnswer("never"), script{enginetest.Answer("never")}, enginetest.Echo())
	h.cfg.Budget.Tokens = 15 // exactly what the first operation uses
	_, res, err := h.run(t)
	require.ErrorIs(t, err, orchestrator.ErrBudgetExhausted)
	require.Equal(t, orchestrator.LimitTokens, res.Limit)
	require.Equal(t, 1, h.first.Calls(), "the second model operation is refused")
	require.Zero(t, h.second.Calls())
	require.Equal(t, int64(15), res.Usage.Total())
}

// A handoff that repeats a later one than the first is a loop too: the
// reviewer's second feedback repeats its first (the other loop tests
// repeat only the first handoff).
func TestO5_LoopDetectedOnARepeatOfALaterHandoff(t *testing.T) {
	h := newHarness(t, orchestrator.ReviewLoop,
		script{enginetest.Answer("Draft one."), enginetest.Answer("Draft two."), enginetest.Answer("never")},
		script{enginetest.Answer("Change the ending."), enginetest.Answer("Change the ending."), enginetest.Answer("never")})
	h.cfg.MaxRounds = 5
	p, res, err := h.run(t)
	require.ErrorIs(t, err, orchestrator.ErrLoopDetected)
	require.Equal(t, orchestrator.ReasonLoopDetected, res.Reason)
	require.Equal(t, 4, res.Runs, "the writer does not run on repeated feedback")
	require.Equal(t, 2, h.first.Calls())
	hs := handoffs(timeline(t, p))
	require.Len(t, hs, 4)
	require.Equal(t, hs[1].SHA256, hs[3].SHA256)
	require.NotEqual(t, hs[0].SHA256, hs[3].SHA256)
}
