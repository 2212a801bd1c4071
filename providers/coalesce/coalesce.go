package coalesce

import (
	"context"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
)

// Readier is the optional method of a model.Stream that lets the decorator
// merge its text deltas; see the package documentation.
type Readier interface {
	// Ready reports whether the next Recv returns without waiting for the
	// model.
	Ready() bool
}

// Config is the input to New.
type Config struct {
	// Provider is the decorated provider. Required.
	Provider model.Provider
}

// provider is the decorated provider. It is immutable and safe for
// concurrent use when its inner provider is.
type provider struct{ inner model.Provider }

// New validates cfg and returns the decorated provider. A provider New
// already returned is returned as it is.
func New(cfg Config) (model.Provider, error) {
	switch p := cfg.Provider.(type) {
	case nil:
		return nil, bound.Missing("coalesce.provider")
	case *provider:
		return p, nil
	}
	return &provider{inner: cfg.Provider}, nil
}

// Unwrap returns the decorated provider, so that what reads a provider's
// optional methods (its name, its server's address) can look through the
// decorator.
func (p *provider) Unwrap() model.Provider { return p.inner }

// Stream opens the inner provider's stream and decorates it when it
// implements Readier. Its errors are the inner provider's, as they are.
func (p *provider) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	s, err := p.inner.Stream(ctx, req)
	if err != nil {
		return s, err
	}
	r, ok := s.(Readier)
	if !ok {
		return s, nil
	}
	return &stream{inner: s, ready: r}, nil
}

// stream merges ready text deltas. Like every model.Stream it is read by
// one goroutine.
type stream struct {
	inner model.Stream
	ready Readier

	// What ended the last merge, returned (or raised) by the next Recv.
	held      bool
	heldItem  model.Item
	heldErr   error
	heldPanic any // non-nil: the inner stream panicked with it

	buf []byte // the merged text, reused
}

// Recv returns the next item; see the package documentation.
func (s *stream) Recv() (model.Item, error) {
	it, err := s.next()
	if err != nil || it.Kind() != model.KindTextDelta {
		return it, err
	}
	n := len(it.Text())
	merged := false
	for n < bound.MaxTextDeltaBytes && s.lookAhead() {
		nx, nerr, ok := s.recvContained()
		if !ok || nerr != nil || nx.Kind() != model.KindTextDelta || n+len(nx.Text()) > bound.MaxTextDeltaBytes {
			if ok {
				s.held, s.heldItem, s.heldErr = true, nx, nerr
			}
			break
		}
		if !merged {
			s.buf, merged = append(s.buf[:0], it.Text()...), true
		}
		s.buf = append(s.buf, nx.Text()...)
		n += len(nx.Text())
	}
	if !merged {
		return it, nil
	}
	// Valid UTF-8 pieces within the bound concatenate to a valid delta.
	return model.TextDelta(string(s.buf))
}

// next returns the held item, error or panic, or else the inner stream's
// next item.
func (s *stream) next() (model.Item, error) {
	if !s.held {
		return s.inner.Recv()
	}
	it, err, v := s.heldItem, s.heldErr, s.heldPanic
	s.held, s.heldItem, s.heldErr, s.heldPanic = false, model.Item{}, nil, nil
	if v != nil {
		panic(v)
	}
	return it, err
}

// lookAhead reports whether the inner stream's next item is ready. A panic
// in Ready is held as the stream's own.
func (s *stream) lookAhead() (ready bool) {
	defer func() {
		if v := recover(); v != nil {
			s.held, s.heldPanic, ready = true, v, false
		}
	}()
	return s.ready.Ready()
}

// recvContained receives the inner stream's next item; ok is false when
// it panicked, and the panic is then held.
func (s *stream) recvContained() (it model.Item, err error, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			s.held, s.heldPanic, ok = true, v, false
		}
	}()
	it, err = s.inner.Recv()
	return it, err, true
}

// Ready reports whether the next Recv returns without waiting: something
// is held, or the inner stream is ready.
func (s *stream) Ready() bool { return s.held || s.ready.Ready() }

// Close closes the inner stream; what is held is dropped.
func (s *stream) Close() error {
	s.held, s.heldItem, s.heldErr, s.heldPanic = false, model.Item{}, nil, nil
	return s.inner.Close()
}
