package interaction_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/interaction"
)

func TestK28_QuestionValidatesAndCopies(t *testing.T) {
	choices := []string{"yes", "no"}
	q, err := interaction.NewQuestion("ix-1", "Proceed?", choices...)
	require.NoError(t, err)
	choices[0] = "changed"
	var got []string
	for c := range q.Choices() {
		got = append(got, c)
	}
	require.Equal(t, []string{"yes", "no"}, got, "K1: the question keeps its own copy")

	for _, bad := range []struct {
		ix      string
		prompt  string
		choices []string
	}{
		{"", "p", nil},
		{"ix 1", "p", nil},
		{"ix-1", "", nil},
		{"ix-1", strings.Repeat("p", interaction.MaxPromptBytes+1), nil},
		{"ix-1", "p", []string{"a", "a"}},
		{"ix-1", "p", []string{""}},
		{"ix-1", "p", make([]string, interaction.MaxChoices+1)},
	} {
		_, err := interaction.NewQuestion(id.Interaction(bad.ix), bad.prompt, bad.choices...)
		require.ErrorIs(t, err, bound.ErrInvalid, "%+v", bad)
	}
}

func TestK28_AnswerCheckedAgainstQuestion(t *testing.T) {
	q, err := interaction.NewQuestion("ix-1", "Proceed?", "yes", "no")
	require.NoError(t, err)
	require.NoError(t, q.Check(interaction.NewAnswer("ix-1", "yes")))
	require.ErrorIs(t, q.Check(interaction.NewAnswer("ix-1", "maybe")), bound.ErrInvalid)
	require.ErrorIs(t, q.Check(interaction.NewAnswer("ix-2", "yes")), bound.ErrInvalid)
	require.ErrorIs(t, q.Check(interaction.NewAnswer("ix-1", "")), bound.ErrInvalid)

	open, err := interaction.NewQuestion("ix-2", "Name?")
	require.NoError(t, err)
	require.NoError(t, open.Check(interaction.NewAnswer("ix-2", "anything")))
	require.ErrorIs(t, open.Check(interaction.NewAnswer("ix-2", strings.Repeat("a", interaction.MaxAnswerBytes+1))), bound.ErrExceeded)
}
