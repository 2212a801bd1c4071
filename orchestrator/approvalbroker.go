package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/interaction"
)

// Errors of Approvals.Answer.
var (
	// ErrUnknownQuestion: no such question is pending (never asked, already
	// answered and gone, or ended by its timeout or its run).
	ErrUnknownQuestion = errors.New("orchestrator: no such approval question is pending")
	// ErrDigestMismatch: the answer names another call than the question
	// asks about. Nothing is answered.
	ErrDigestMismatch = errors.New("orchestrator: the answer's digest is not the question's")
	// ErrAnswered: the question has its answer already.
	ErrAnswered = errors.New("orchestrator: the approval question is answered already")
	// ErrTooManyPending: Ask refused a question over MaxPending.
	ErrTooManyPending = errors.New("orchestrator: too many approval questions are pending")
)

// DefaultMaxPending bounds the questions an Approvals holds at once.
const DefaultMaxPending = 1024

// ApprovalsConfig is the input to NewApprovals.
type ApprovalsConfig struct {
	// OnQuestion, if set, is told of each question once it is pending,
	// on the asking goroutine. It may call Answer at once (a script's
	// answers do); it must not block, as the call waits behind it.
	OnQuestion func(Approval)
	// Other carries the questions that are not approvals; nil fails them.
	Other interaction.Broker
	// MaxPending bounds the questions waiting at once; 0 means
	// DefaultMaxPending.
	MaxPending int
}

// Approvals is an interaction.Broker for approval questions (R1): it holds
// each question until it is answered by its pair, question ID and digest
// (Answer), or until its asker gives up (the approval timeout, the run's
// end). A host sets it as its worker engines' Broker and answers from
// wherever the person is: a terminal, a file of answers, an HTTP API. An
// answer that names another digest than the question's answers nothing.
//
// It is safe for concurrent use; its methods never block but Ask.
type Approvals struct {
	cfg ApprovalsConfig

	mu      sync.Mutex
	pending map[questionKey]*pendingApproval
	seq     uint64
}

type questionKey struct {
	pair     string
	question id.Interaction
}

type pendingApproval struct {
	a        Approval
	seq      uint64 // arrival order
	answer   chan string
	answered bool
}

var _ interaction.Broker = (*Approvals)(nil)

// NewApprovals returns an empty Approvals.
func NewApprovals(cfg ApprovalsConfig) (*Approvals, error) {
	switch {
	case cfg.MaxPending < 0:
		return nil, bound.Malformedf("approvals.max_pending", "must not be negative")
	case cfg.MaxPending == 0:
		cfg.MaxPending = DefaultMaxPending
	}
	return &Approvals{cfg: cfg, pending: make(map[questionKey]*pendingApproval)}, nil
}

// Ask holds an approval question until its answer or the end of ctx, and
// hands any other question to Config.Other.
func (b *Approvals) Ask(ctx context.Context, q interaction.Question) (interaction.Answer, error) {
	a, err := ParseApproval(q)
	switch {
	case errors.Is(err, ErrNotApproval) && b.cfg.Other != nil:
		return b.cfg.Other.Ask(ctx, q)
	case err != nil:
		return interaction.Answer{}, err
	}
	k := questionKey{pair: a.Pair, question: a.Question}
	p := &pendingApproval{a: a, answer: make(chan string, 1)}
	b.mu.Lock()
	switch {
	case b.pending[k] != nil:
		b.mu.Unlock()
		return interaction.Answer{}, bound.Conflicting("approval.question", "a question with this ID is pending")
	case len(b.pending) >= b.cfg.MaxPending:
		b.mu.Unlock()
		return interaction.Answer{}, ErrTooManyPending
	}
	b.seq++
	p.seq = b.seq
	b.pending[k] = p
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.pending, k)
		b.mu.Unlock()
	}()
	if b.cfg.OnQuestion != nil {
		b.cfg.OnQuestion(a)
	}
	select {
	case text := <-p.answer:
		return interaction.NewAnswer(q.ID(), text), nil
	case <-ctx.Done():
		return interaction.Answer{}, ctx.Err()
	}
}

// Pending returns the questions waiting for an answer, oldest first.
func (b *Approvals) Pending() []Approval {
	b.mu.Lock()
	ps := make([]*pendingApproval, 0, len(b.pending))
	for _, p := range b.pending {
		if !p.answered {
			ps = append(ps, p)
		}
	}
	b.mu.Unlock()
	slices.SortFunc(ps, func(x, y *pendingApproval) int { return cmp.Compare(x.seq, y.seq) })
	out := make([]Approval, len(ps))
	for i, p := range ps {
		out[i] = p.a
	}
	return out
}

// Answer approves (or denies) the pending question of pair pairID named
// question, provided digest is the digest it asks about: an answer is
// bound to the exact call (R1). It fails with ErrUnknownQuestion,
// ErrDigestMismatch or ErrAnswered and then answers nothing.
func (b *Approvals) Answer(pairID string, question id.Interaction, digest string, approve bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pending[questionKey{pair: pairID, question: question}]
	switch {
	case p == nil:
		return ErrUnknownQuestion
	case p.a.Digest != digest:
		return ErrDigestMismatch
	case p.answered:
		return ErrAnswered
	}
	p.answered = true
	p.answer <- ApprovalAnswer(digest, approve)
	return nil
}
