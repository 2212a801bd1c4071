package providerkit

import (
	"context"
	"io"
	"sync"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// fake is a small provider whose behaviour each test chooses; its zero
// hooks make it conform.
type fake struct {
	items []model.Item
	stall bool  // after items, wait for the context
	deaf  bool  // never look at the context
	err   error // returned by Stream

	// Hooks that break the contract, for the kit's own tests.
	afterEOF    func() error                     // Recv after io.EOF
	onClose     func() error                     // Close
	onStall     func(ctx context.Context) error  // replaces waiting for ctx
	onStream    func(ctx context.Context)        // runs in Stream
	streamAlso  bool                             // return a stream with err
	afterCancel func() (model.Item, error, bool) // what Recv returns once ctx is done
}

func (f *fake) Stream(ctx context.Context, _ model.Request) (model.Stream, error) {
	if f.onStream != nil {
		f.onStream(ctx)
	}
	if f.err != nil {
		if f.streamAlso {
			return &fakeStream{f: f, ctx: ctx}, f.err
		}
		return nil, f.err
	}
	return &fakeStream{f: f, ctx: ctx}, nil
}

type fakeStream struct {
	f   *fake
	ctx context.Context
	i   int
	eof bool
}

func (s *fakeStream) Recv() (model.Item, error) {
	if s.eof && s.f.afterEOF != nil {
		return model.Item{}, s.f.afterEOF()
	}
	if err := s.ctx.Err(); err != nil && !s.f.deaf {
		if s.f.afterCancel != nil {
			if it, err, ok := s.f.afterCancel(); ok {
				return it, err
			}
		}
		return model.Item{}, err
	}
	if s.i < len(s.f.items) {
		s.i++
		return s.f.items[s.i-1], nil
	}
	if s.f.stall {
		if s.f.onStall != nil {
			return model.Item{}, s.f.onStall(s.ctx)
		}
		<-s.ctx.Done()
		if s.f.afterCancel != nil {
			if it, err, ok := s.f.afterCancel(); ok {
				return it, err
			}
		}
		return model.Item{}, s.ctx.Err()
	}
	s.eof = true
	return model.Item{}, io.EOF
}

func (s *fakeStream) Close() error {
	if s.f.onClose != nil {
		return s.f.onClose()
	}
	return nil
}

// release is a channel a misbehaving fake blocks on; the test's cleanup
// closes it so no goroutine outlives the test binary.
type release struct {
	once sync.Once
	ch   chan struct{}
}

func newRelease() *release { return &release{ch: make(chan struct{})} }
func (r *release) close()  { r.once.Do(func() { close(r.ch) }) }

func textItem(s string) model.Item { return must(model.TextDelta(s)) }

func callItem(callID string) model.Item {
	return must(model.ToolCall(must(tool.NewCall(id.Call(callID), DefaultToolName, []byte(`{"query":"hello"}`)))))
}

func doneItem() model.Item { return model.Completed(must(model.NewUsage(3, 2)), model.Metadata{}) }

func failedItem() model.Item { return must(model.Failed(problem.Must("stopped", "the fake stopped"))) }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
