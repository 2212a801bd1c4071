package engine

import (
	"context"

	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Every call into injected code goes through one of these, so a panic there
// becomes a typed failure of the affected operation (K25). The panic value
// is dropped: it may carry anything, secrets included.

func openStream(ctx context.Context, p model.Provider, req model.Request) (s model.Stream, err error) {
	defer func() {
		if recover() != nil {
			s, err = nil, errPanic
		}
	}()
	s, err = p.Stream(ctx, req)
	if err == nil && s == nil {
		err = errNoStream
	}
	return s, err
}

func recv(s model.Stream) (it model.Item, err error) {
	defer func() {
		if recover() != nil {
			it, err = model.Item{}, errPanic
		}
	}()
	return s.Recv()
}

func closeStream(s model.Stream) (err error) {
	defer func() {
		if recover() != nil {
			err = errPanic
		}
	}()
	// A Close error after a complete stream changes nothing the model said;
	// only a panic is reported.
	_ = s.Close()
	return nil
}

func dispatch(ctx context.Context, d tool.Dispatcher, call tool.Call, rep tool.Reporter) (res tool.Result, err error) {
	defer func() {
		if recover() != nil {
			res, err = tool.Result{}, errPanic
		}
	}()
	return d.Dispatch(ctx, call, rep)
}
