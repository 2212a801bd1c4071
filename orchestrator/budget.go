package orchestrator

import (
	"context"
	"sync/atomic"

	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// CodeBudgetExhausted is the problem code of the model operations the pair
// refuses once its token budget is spent.
const CodeBudgetExhausted = "budget_exhausted"

var errTokensSpent = func() error {
	e, err := model.NewProviderError(model.ProviderErrorConfig{
		Problem: problem.Must(CodeBudgetExhausted, "the pair's token budget is spent"),
	})
	if err != nil {
		panic(err)
	}
	return e
}()

// meter is what a pair's budgets count, over both workers.
type meter struct {
	tokens    atomic.Int64 // tokens of completed model operations
	requested atomic.Int64 // tool calls the models requested
}

// tokensSpent reports whether the pair's token budget, if any, is spent.
func (p *Pair) tokensSpent() bool {
	b := p.cfg.Budget.Tokens
	return b > 0 && p.use.tokens.Load() >= b
}

// metered is the budget decorator around a worker's provider: it refuses
// new model operations once the pair's token budget is spent, and stops
// the pair at the first requested tool call over its tool-call budget,
// before that call can start. The kernel sees an ordinary provider.
//
// It meters the pair its crew is lent to: only that pair runs the crew's
// workers while it holds the crew.
type metered struct {
	inner model.Provider
	c     *crew
}

func (m *metered) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	p := m.c.pair
	if p.tokensSpent() {
		p.halt(stopTokens)
		return nil, errTokensSpent
	}
	s, err := m.inner.Stream(ctx, req)
	if err != nil || s == nil {
		return s, err
	}
	return &meteredStream{inner: s, p: p}, nil
}

type meteredStream struct {
	inner model.Stream
	p     *Pair
}

func (s *meteredStream) Recv() (model.Item, error) {
	it, err := s.inner.Recv()
	if err != nil {
		return it, err
	}
	switch it.Kind() {
	case model.KindToolCall:
		if b := s.p.cfg.Budget.ToolCalls; s.p.use.requested.Add(1) > b && b > 0 {
			// The engine sees the cancellation before it runs any call
			// of this operation.
			s.p.halt(stopToolCalls)
		}
	case model.KindCompleted:
		s.p.use.tokens.Add(it.Usage().Total())
	}
	return it, nil
}

func (s *meteredStream) Close() error { return s.inner.Close() }
