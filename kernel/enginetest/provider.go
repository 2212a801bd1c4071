package enginetest

import (
	"context"
	"io"
	"sync"

	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// Provider is a scripted model.Provider: the n-th Stream call replays the
// n-th script entry (cycling when Cycle is set). It records the requests it
// was given. It is safe for concurrent use.
type Provider struct {
	// Cycle restarts the script after its last entry, for benchmarks that
	// reuse one provider for many runs.
	Cycle bool
	// Record keeps every request (off by default to keep benchmarks lean).
	Record bool

	mu       sync.Mutex
	script   [][]model.Item
	next     int
	requests []model.Request
}

// NewProvider returns a provider for the given script: one list of stream
// items per model operation.
func NewProvider(script ...[]model.Item) *Provider {
	return &Provider{script: script}
}

var problemExhausted = problem.Must("script_exhausted", "the scripted provider has no more operations")

// Stream replays the next scripted operation.
func (p *Provider) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	p.mu.Lock()
	if p.Record {
		p.requests = append(p.requests, req)
	}
	if p.next >= len(p.script) {
		if !p.Cycle || len(p.script) == 0 {
			p.mu.Unlock()
			return nil, must(model.NewProviderError(model.ProviderErrorConfig{Problem: problemExhausted}))
		}
		p.next = 0
	}
	items := p.script[p.next]
	p.next++
	p.mu.Unlock()
	return &Stream{ctx: ctx, items: items}, nil
}

// Requests returns the recorded requests.
func (p *Provider) Requests() []model.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]model.Request(nil), p.requests...)
}

// Calls returns how many operations have been served.
func (p *Provider) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

// Stream replays a fixed list of items, then io.EOF. It honours the
// context of the Stream call between items.
type Stream struct {
	ctx    context.Context
	items  []model.Item
	i      int
	closed bool
}

// Recv returns the next item.
func (s *Stream) Recv() (model.Item, error) {
	if err := s.ctx.Err(); err != nil {
		return model.Item{}, err
	}
	if s.i >= len(s.items) {
		return model.Item{}, io.EOF
	}
	it := s.items[s.i]
	s.i++
	return it, nil
}

// Close marks the stream closed.
func (s *Stream) Close() error {
	s.closed = true
	return nil
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
