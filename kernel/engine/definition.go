package engine

import (
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
)

// DefinitionConfig is the input to NewDefinition.
type DefinitionConfig struct {
	Name     string // a bound.Name, e.g. "writer"
	Model    string // the provider's model name
	System   string // system prompt, may be empty
	MaxTurns int    // 1..Limits.MaxTurns
}

// Definition is an immutable, validated agent definition.
type Definition struct {
	name     string
	model    string
	system   string
	maxTurns int
}

// NewDefinition validates cfg. The engine checks MaxTurns against its own
// limit again at Start.
func NewDefinition(cfg DefinitionConfig) (Definition, error) {
	if err := bound.Name("definition.name", cfg.Name); err != nil {
		return Definition{}, err
	}
	if err := model.CheckModelName("definition.model", cfg.Model); err != nil {
		return Definition{}, err
	}
	if err := bound.OptionalText("definition.system", cfg.System, bound.MaxSystemPromptBytes); err != nil {
		return Definition{}, err
	}
	if cfg.MaxTurns < 1 {
		return Definition{}, bound.Malformedf("definition.max_turns", "must be at least 1")
	}
	return Definition{name: cfg.Name, model: cfg.Model, system: cfg.System, maxTurns: cfg.MaxTurns}, nil
}

// Name returns the definition name.
func (d Definition) Name() string { return d.name }

// Model returns the model name.
func (d Definition) Model() string { return d.model }

// System returns the system prompt.
func (d Definition) System() string { return d.system }

// MaxTurns returns the maximum number of turns.
func (d Definition) MaxTurns() int { return d.maxTurns }

// IsZero reports whether d is the zero Definition.
func (d Definition) IsZero() bool { return d.name == "" }
