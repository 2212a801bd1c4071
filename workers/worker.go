package workers

import (
	"context"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
)

// Config describes one worker.
type Config struct {
	// Role names the worker within whatever composes it: a bound.Name
	// such as "writer" or "reviewer".
	Role string
	// Definition is what every run of the worker uses: system prompt,
	// model and maximum turns. Required.
	Definition engine.Definition
	// Engine configures the worker's own engine: provider, plan source,
	// ID source, clock, observers and limits. New builds a new engine from
	// it, so no two workers share an engine.
	Engine engine.Config
}

// Worker is a role, an engine and a definition. It is safe for concurrent
// use; its fields never change after New.
type Worker struct {
	role string
	def  engine.Definition
	eng  *engine.Engine
}

// New validates cfg and builds the worker's engine.
func New(cfg Config) (*Worker, error) {
	if err := bound.Name("worker.role", cfg.Role); err != nil {
		return nil, err
	}
	if cfg.Definition.IsZero() {
		return nil, bound.Missing("worker.definition")
	}
	eng, err := engine.New(cfg.Engine)
	if err != nil {
		return nil, err
	}
	return &Worker{role: cfg.Role, def: cfg.Definition, eng: eng}, nil
}

// Role returns the worker's role name.
func (w *Worker) Role() string { return w.role }

// Definition returns the definition of the worker's runs.
func (w *Worker) Definition() engine.Definition { return w.def }

// Engine returns the worker's own engine.
func (w *Worker) Engine() *engine.Engine { return w.eng }

// Run runs the worker's definition on in, on the calling goroutine
// (engine.Engine.Run): when it returns without an error the run has ended.
func (w *Worker) Run(ctx context.Context, in engine.Input) (*engine.Run, error) {
	return w.eng.Run(ctx, w.def, in)
}

// Start starts a run of the worker's definition on its own goroutine
// (engine.Engine.Start).
func (w *Worker) Start(ctx context.Context, in engine.Input) (*engine.Run, error) {
	return w.eng.Start(ctx, w.def, in)
}

// Close refuses new runs and waits for the active ones (engine.Engine.Close):
// it drains, the reverse of net/http's Server.Close.
func (w *Worker) Close(ctx context.Context) error { return w.eng.Close(ctx) }

// Shutdown also asks the active runs to cancel (engine.Engine.Shutdown),
// the reverse of net/http's graceful Server.Shutdown.
func (w *Worker) Shutdown(ctx context.Context) error { return w.eng.Shutdown(ctx) }
