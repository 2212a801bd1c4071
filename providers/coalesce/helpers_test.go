package coalesce_test

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/providers/coalesce"
)

// step is what the test stream does on one Recv: return item and err, or
// panic with panicValue. late marks a step the model sends after a pause:
// before it, Ready is false.
type step struct {
	item       model.Item
	err        error
	panicValue any
	late       bool
}

func ready(it model.Item) step { return step{item: it} }
func late(it model.Item) step  { return step{item: it, late: true} }
func readyPanic(v any) step    { return step{panicValue: v} }
func text(s string) model.Item { return must(model.TextDelta(s)) }

// readyStream is a stream that implements Ready truthfully over its steps:
// the next Recv returns without waiting unless the next step is late.
// After its steps it returns io.EOF.
type readyStream struct {
	steps      []step
	i          int
	closed     int
	closeErr   error
	readyPanic any // Ready panics with it when set
}

func (s *readyStream) Ready() bool {
	if s.readyPanic != nil {
		panic(s.readyPanic)
	}
	return s.i >= len(s.steps) || !s.steps[s.i].late
}

func (s *readyStream) Recv() (model.Item, error) {
	if s.i >= len(s.steps) {
		return model.Item{}, io.EOF
	}
	st := s.steps[s.i]
	s.i++
	if st.panicValue != nil {
		panic(st.panicValue)
	}
	return st.item, st.err
}

func (s *readyStream) Close() error {
	s.closed++
	return s.closeErr
}

// plainStream is the same stream without Ready.
type plainStream struct{ s readyStream }

func (s *plainStream) Recv() (model.Item, error) { return s.s.Recv() }
func (s *plainStream) Close() error              { return s.s.Close() }

// streams is a provider that answers every request with a new stream made
// by next, or with err.
type streams struct {
	next func() model.Stream
	err  error
}

func (p streams) Stream(context.Context, model.Request) (model.Stream, error) {
	if p.err != nil {
		return nil, p.err
	}
	return p.next(), nil
}

// open decorates a provider of s and opens its stream.
func open(t *testing.T, s model.Stream) model.Stream {
	t.Helper()
	p, err := coalesce.New(coalesce.Config{Provider: streams{next: func() model.Stream { return s }}})
	require.NoError(t, err)
	out, err := p.Stream(context.Background(), request(t))
	require.NoError(t, err)
	return out
}

// got is one Recv's answer.
type got struct {
	item model.Item
	err  error
}

// drain calls Recv until it has seen io.EOF twice, and returns every
// answer.
func drain(t *testing.T, s model.Stream) []got {
	t.Helper()
	var out []got
	eofs := 0
	for range 1000 {
		it, err := s.Recv()
		out = append(out, got{it, err})
		if err == io.EOF {
			if eofs++; eofs == 2 {
				return out
			}
		}
	}
	t.Fatal("the stream did not end")
	return nil
}

func request(t testing.TB) model.Request {
	t.Helper()
	r, err := model.NewRequest(model.RequestConfig{Operation: id.Operation("op-1"), Model: "m",
		Messages: []message.Message{must(message.User("hi"))}})
	require.NoError(t, err)
	return r
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
