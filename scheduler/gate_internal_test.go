package scheduler

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/model"
)

// fakeStream returns its items, then err (io.EOF if nil); it can panic in
// Recv instead.
type fakeStream struct {
	items  []model.Item
	err    error
	panics bool
	closed int
}

func (f *fakeStream) Recv() (model.Item, error) {
	if f.panics {
		panic("recv")
	}
	if len(f.items) == 0 {
		if f.err != nil {
			return model.Item{}, f.err
		}
		return model.Item{}, io.EOF
	}
	it := f.items[0]
	f.items = f.items[1:]
	return it, nil
}

func (f *fakeStream) Close() error { f.closed++; return nil }

type fakeProvider struct {
	stream *fakeStream
	err    error
	panics bool
}

func (p *fakeProvider) Stream(context.Context, model.Request) (model.Stream, error) {
	if p.panics {
		panic("stream")
	}
	if p.err != nil {
		return nil, p.err
	}
	if p.stream == nil {
		return nil, nil
	}
	return p.stream, nil
}

// TestGateReleasesExactlyOnce drives one operation through the decorator
// for every way a stream can end, on a single slot. After each the slot is
// free again (TryAcquire succeeds) and was given back exactly once: a
// second release would panic the semaphore ("released more than held").
func TestGateReleasesExactlyOnce(t *testing.T) {
	text, done := enginetest.Text("hi"), enginetest.Done(1, 1)
	failed := enginetest.Fail("oops", "model failed")
	recvErr := errors.New("connection reset")
	for name, tc := range map[string]struct {
		p     *fakeProvider
		reads int // Recv calls before Close; -1 reads to the end
	}{
		"completed then EOF then Close": {p: &fakeProvider{stream: &fakeStream{items: []model.Item{text, done}}}, reads: -1},
		"failed item then Close":        {p: &fakeProvider{stream: &fakeStream{items: []model.Item{failed}}}, reads: 1},
		"EOF without terminal":          {p: &fakeProvider{stream: &fakeStream{items: []model.Item{text}}}, reads: -1},
		"Recv error":                    {p: &fakeProvider{stream: &fakeStream{err: recvErr}}, reads: -1},
		"Close midway":                  {p: &fakeProvider{stream: &fakeStream{items: []model.Item{text, text, done}}}, reads: 1},
		"Close unread":                  {p: &fakeProvider{stream: &fakeStream{items: []model.Item{done}}}, reads: 0},
		"Recv panics":                   {p: &fakeProvider{stream: &fakeStream{panics: true}}, reads: 1},
		"Stream error":                  {p: &fakeProvider{err: recvErr}},
		"no stream":                     {p: &fakeProvider{}},
		"Stream panics":                 {p: &fakeProvider{panics: true}},
	} {
		t.Run(name, func(t *testing.T) {
			sl := newSlots(1, 0)
			g := &gate{inner: tc.p, slots: sl}
			st, err := callStream(g)
			if tc.p.stream == nil {
				require.Nil(t, st)
				if tc.p.err != nil {
					require.ErrorIs(t, err, tc.p.err)
				}
			} else {
				require.NoError(t, err)
				require.Equal(t, int64(1), sl.inFlight.Load())
				require.False(t, sl.sem.TryAcquire(1), "the operation holds the slot")
				for i := 0; tc.reads < 0 || i < tc.reads; i++ {
					_, err := callRecv(st)
					if err != nil {
						break
					}
				}
				_, _ = callRecv(st) // reads after the end change nothing
				require.NoError(t, st.Close())
				require.NoError(t, st.Close())
				require.Equal(t, 2, tc.p.stream.closed)
			}
			require.Zero(t, sl.inFlight.Load())
			require.True(t, sl.sem.TryAcquire(1), "the slot is free")
			sl.sem.Release(1)
		})
	}
}

func callStream(g *gate) (st model.Stream, err error) {
	defer func() {
		if recover() != nil {
			st, err = nil, errPanic
		}
	}()
	return g.Stream(context.Background(), model.Request{})
}

func callRecv(st model.Stream) (it model.Item, err error) {
	defer func() {
		if recover() != nil {
			err = errPanic
		}
	}()
	return st.Recv()
}

// TestGateWaitHonoursContext: an operation waiting for a slot ends with its
// context, with a provider error whose cause is the context's error (so the
// engine classifies it as a cancellation), and takes no slot.
func TestGateWaitHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sl := newSlots(1, 0)
		require.NoError(t, sl.acquire(context.Background()))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		g := &gate{inner: &fakeProvider{stream: &fakeStream{}}, slots: sl}
		st, err := g.Stream(ctx, model.Request{})
		require.Nil(t, st)
		var pe *model.ProviderError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, CodeModelWaitEnded, pe.Problem().Code())
		require.False(t, pe.Retryable())
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, int64(1), sl.inFlight.Load())
		sl.release()
		require.Equal(t, uint64(1), sl.waited.Load())
	})
}
