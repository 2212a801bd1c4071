package interaction

import (
	"context"
	"iter"
	"slices"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
)

// Bounds for interactions, published with the other kernel bounds.
const (
	MaxPromptBytes = 8 << 10
	MaxAnswerBytes = 8 << 10
	MaxChoices     = 16
)

// Question is an immutable question. When Choices is non-empty the answer
// must be exactly one of them.
type Question struct {
	id      id.Interaction
	prompt  string
	choices []string
}

// NewQuestion validates and returns a question. The engine assigns the ID.
func NewQuestion(ix id.Interaction, prompt string, choices ...string) (Question, error) {
	if err := id.Check("interaction.id", string(ix)); err != nil {
		return Question{}, err
	}
	if err := bound.Text("interaction.prompt", prompt, MaxPromptBytes); err != nil {
		return Question{}, err
	}
	if err := bound.Count("interaction.choices", len(choices), MaxChoices); err != nil {
		return Question{}, err
	}
	for i, c := range choices {
		if err := bound.Text("interaction.choices", c, MaxAnswerBytes); err != nil {
			return Question{}, err
		}
		if slices.Contains(choices[:i], c) {
			return Question{}, bound.Malformedf("interaction.choices", "duplicate choice")
		}
	}
	return Question{id: ix, prompt: prompt, choices: slices.Clone(choices)}, nil
}

// ID returns the interaction ID.
func (q Question) ID() id.Interaction { return q.id }

// Prompt returns the question text.
func (q Question) Prompt() string { return q.prompt }

// Choices yields the allowed answers, if any.
func (q Question) Choices() iter.Seq[string] { return slices.Values(q.choices) }

// Check validates an answer against the question: bounded, non-empty, and
// one of the choices when there are choices.
func (q Question) Check(a Answer) error {
	if a.id != q.id {
		return bound.Conflicting("interaction.answer.id", "answer is for another interaction")
	}
	if err := bound.Text("interaction.answer", a.text, MaxAnswerBytes); err != nil {
		return err
	}
	if len(q.choices) > 0 && !slices.Contains(q.choices, a.text) {
		return bound.Malformedf("interaction.answer", "not one of the offered choices")
	}
	return nil
}

// Answer is an immutable answer to one question.
type Answer struct {
	id   id.Interaction
	text string
}

// NewAnswer returns an answer to the question with ID ix. It is validated
// against its question by Question.Check, which the engine always calls.
func NewAnswer(ix id.Interaction, text string) Answer { return Answer{id: ix, text: text} }

// ID returns the interaction this answers.
func (a Answer) ID() id.Interaction { return a.id }

// Text returns the answer.
func (a Answer) Text() string { return a.text }

// Broker carries a question to whoever answers it. Ask blocks until an
// answer, an error, or ctx is done; it must honour ctx. It is a foreign
// call: the engine contains its panics and validates its answers.
type Broker interface {
	Ask(ctx context.Context, q Question) (Answer, error)
}

// Asker is what a running tool uses to ask a question. The engine's progress
// reporter implements it; a tool finds it by asserting its tool.Reporter to
// Asker. Ask returns the validated answer or an error; either way the
// interaction has already reached its single terminal event.
type Asker interface {
	Ask(ctx context.Context, prompt string, choices ...string) (string, error)
}
