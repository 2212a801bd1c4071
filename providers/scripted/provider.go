package scripted

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Problem codes of the Failed items and errors this provider produces.
const (
	CodeScriptExhausted = "script_exhausted" // no step for this operation
	CodeToolNotOffered  = "tool_not_offered" // a step calls a tool the request does not offer
	CodeInvalidRequest  = "invalid_request"  // Stream got the zero Request
)

var (
	problemExhausted = problem.Must(CodeScriptExhausted,
		"the script has no step that matches the last user message at this position")
	problemNotOffered = problem.Must(CodeToolNotOffered,
		"the script calls a tool that the request does not offer")
	problemInvalidRequest = problem.Must(CodeInvalidRequest, "the request is empty")

	itemExhausted  = failedItem(problemExhausted)
	itemNotOffered = failedItem(problemNotOffered)
)

// failedItem is for the constant problems above; their validity is checked
// when the package is initialised, by every test.
func failedItem(p problem.Problem) model.Item {
	it, err := model.Failed(p)
	if err != nil {
		panic(err)
	}
	return it
}

// ErrClosed is what Recv returns after Close.
var ErrClosed = errors.New("scripted: stream closed")

// Provider is an immutable scripted model.Provider. It is safe for
// concurrent use: every answer is derived from the request alone.
type Provider struct {
	steps []step // never written after NewProvider
	// items holds each step's text deltas, prebuilt because they do not
	// depend on the request.
	items [][]model.Item
	done  []model.Item // each step's Completed item
}

var _ model.Provider = (*Provider)(nil)

// NewProvider validates s and returns a provider answering from it. Every
// error is a *bound.Error naming the offending field.
func NewProvider(s Script) (*Provider, error) {
	c, err := compile(s)
	if err != nil {
		return nil, err
	}
	p := &Provider{steps: c.steps, items: make([][]model.Item, len(c.steps)), done: make([]model.Item, len(c.steps))}
	for i, st := range c.steps {
		for _, d := range st.deltas {
			it, err := model.TextDelta(d)
			if err != nil {
				return nil, err
			}
			p.items[i] = append(p.items[i], it)
		}
		u, err := model.NewUsage(st.usage.Input, st.usage.Output)
		if err != nil {
			return nil, err
		}
		p.done[i] = model.Completed(u, model.Metadata{})
	}
	return p, nil
}

// Stream answers req with the step the selection rule picks (see the
// package documentation). Only a zero Request is an error here; a missing
// step or an unoffered tool is reported as the stream's Failed item, so the
// engine records the model operation's failure.
func (p *Provider) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if req.IsZero() {
		return nil, mustProviderError(problemInvalidRequest)
	}
	i, ok := p.Select(req)
	if !ok {
		return failedStream(ctx, itemExhausted), nil
	}
	st := &p.steps[i]
	for _, c := range st.calls {
		if !offers(req, c.name) {
			return failedStream(ctx, itemNotOffered), nil
		}
	}
	items := make([]model.Item, 0, len(p.items[i])+len(st.calls)+1)
	items = append(items, p.items[i]...)
	for j, c := range st.calls {
		call, err := tool.NewCall(CallID(req.Operation(), j), c.name, c.args)
		if err != nil {
			return nil, err // unreachable: names and arguments were validated
		}
		it, err := model.ToolCall(call)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	items = append(items, p.done[i])
	return &stream{ctx: ctx, items: items}, nil
}

// Select returns the index of the step that answers req, following the
// selection rule, and false when the script has none.
func (p *Provider) Select(req model.Request) (int, bool) {
	input, k := position(req)
	for i := range p.steps {
		if !p.steps[i].match.accepts(input) {
			continue
		}
		if k == 0 {
			return i, true
		}
		k--
	}
	return 0, false
}

// position returns the text of the last user message and the number of
// assistant messages after it.
func position(req model.Request) (input string, k int) {
	for m := range req.Messages() {
		switch m.Role() {
		case message.RoleUser:
			input, k = m.Text(), 0
		case message.RoleAssistant:
			k++
		}
	}
	return input, k
}

func offers(req model.Request, name string) bool {
	for d := range req.Tools() {
		if d.Name() == name {
			return true
		}
	}
	return false
}

// CallID returns the ID of call j (zero-based) of operation op: op + "-c" +
// (j+1). When that would exceed bound.MaxIDBytes, the operation ID is
// replaced by a SHA-256 prefix, so IDs stay deterministic and distinct.
func CallID(op id.Operation, j int) id.Call {
	suffix := "-c" + strconv.Itoa(j+1)
	if len(op)+len(suffix) <= bound.MaxIDBytes {
		return id.Call(string(op) + suffix)
	}
	sum := sha256.Sum256([]byte(op))
	return id.Call("op-" + hex.EncodeToString(sum[:16]) + suffix)
}

func mustProviderError(p problem.Problem) error {
	e, err := model.NewProviderError(model.ProviderErrorConfig{Problem: p})
	if err != nil {
		return err
	}
	return e
}

func failedStream(ctx context.Context, it model.Item) *stream {
	return &stream{ctx: ctx, items: []model.Item{it}}
}

// stream replays prepared items. It is read by one goroutine (model.Stream).
type stream struct {
	ctx    context.Context
	items  []model.Item
	next   int
	closed bool
}

// Recv returns the next item, io.EOF after the terminal item, the
// context's error once it is done (before the terminal), and ErrClosed
// after Close.
func (s *stream) Recv() (model.Item, error) {
	switch {
	case s.closed:
		return model.Item{}, ErrClosed
	case s.next >= len(s.items):
		return model.Item{}, io.EOF
	}
	if err := s.ctx.Err(); err != nil {
		return model.Item{}, err
	}
	it := s.items[s.next]
	s.next++
	return it, nil
}

// Close releases nothing and is idempotent; it exists for the contract.
func (s *stream) Close() error {
	s.closed = true
	return nil
}

// ProviderName returns "spice_orch.scripted": the name telemetry gives a
// scripted worker (gen_ai.provider.name), a custom value in the project's
// namespace since no GenAI system answers it.
func (p *Provider) ProviderName() string { return "spice_orch.scripted" }
