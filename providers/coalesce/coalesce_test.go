package coalesce_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/providers/coalesce"
)

var (
	done = enginetest.Done(10, 5)
	call = enginetest.Call("c1", "echo", `{}`)
	eof  = got{err: io.EOF}
)

func item(it model.Item) got { return got{item: it} }

// A caller that fell behind gets the text deltas the model already sent
// as one delta; a delta the model has not sent yet is not waited for.
func TestS1_ReadyTextDeltasBecomeOneDelta(t *testing.T) {
	s := open(t, &readyStream{steps: []step{
		ready(text("Hel")), ready(text("lo")), ready(text(", ")),
		late(text("world")), ready(text("!")), ready(done),
	}})
	require.Equal(t, []got{item(text("Hello, ")), item(text("world!")), item(done), eof, eof}, drain(t, s))
}

// A caller that keeps up (the next item is never ready when it asks) gets
// every item exactly as the model sent it.
func TestS1_AStreamThatKeepsUpIsUnchanged(t *testing.T) {
	s := open(t, &readyStream{steps: []step{
		late(text("Hel")), late(text("lo")), late(call), late(text("!")), late(done),
	}})
	require.Equal(t, []got{item(text("Hel")), item(text("lo")), item(call), item(text("!")), item(done), eof, eof}, drain(t, s))
}

// The merged delta is a valid item: it never exceeds the per-item bound,
// and the delta that would make it exceed it comes next, whole.
func TestK23_AMergeStopsBeforeTheTextDeltaBound(t *testing.T) {
	a, b, c := strings.Repeat("a", 40<<10), strings.Repeat("b", 24<<10), strings.Repeat("c", 24<<10+1)
	full := strings.Repeat("f", bound.MaxTextDeltaBytes)
	for name, tc := range map[string]struct {
		in   []step
		want []got
	}{
		"exactly the bound": {
			in:   []step{ready(text(a)), ready(text(b)), ready(text("x")), ready(done)},
			want: []got{item(text(a + b)), item(text("x")), item(done), eof, eof},
		},
		"one byte over": {
			in:   []step{ready(text(a)), ready(text(c)), ready(text("x")), ready(done)},
			want: []got{item(text(a)), item(text(c + "x")), item(done), eof, eof},
		},
		"a full first delta": {
			in:   []step{ready(text(full)), ready(text("x")), ready(done)},
			want: []got{item(text(full)), item(text("x")), item(done), eof, eof},
		},
	} {
		t.Run(name, func(t *testing.T) {
			out := drain(t, open(t, &readyStream{steps: tc.in}))
			require.Equal(t, tc.want, out)
			for _, g := range out {
				require.LessOrEqual(t, len(g.item.Text()), bound.MaxTextDeltaBytes)
			}
		})
	}
}

// A ready item that is not a text delta ends the merge and is returned by
// the next Recv: nothing is lost, reordered or duplicated.
func TestK23_AHeldItemIsReturnedNext(t *testing.T) {
	failed := enginetest.Fail("boom", "the model failed")
	for name, tc := range map[string]struct {
		in   []step
		want []got
	}{
		"tool call": {
			in:   []step{ready(text("a")), ready(text("b")), ready(call), ready(text("c")), ready(text("d")), ready(done)},
			want: []got{item(text("ab")), item(call), item(text("cd")), item(done), eof, eof},
		},
		"completed": {
			in:   []step{ready(text("a")), ready(text("b")), ready(done)},
			want: []got{item(text("ab")), item(done), eof, eof},
		},
		"failed": {
			in:   []step{ready(text("a")), ready(text("b")), ready(failed)},
			want: []got{item(text("ab")), item(failed), eof, eof},
		},
		// An item after the terminal is the inner stream's malformation:
		// it reaches the caller as it would without the decorator.
		"text after the terminal": {
			in:   []step{ready(text("a")), ready(done), ready(text("b")), ready(text("c"))},
			want: []got{item(text("a")), item(done), item(text("bc")), eof, eof},
		},
		"the zero item": {
			in:   []step{ready(text("a")), ready(model.Item{}), ready(done)},
			want: []got{item(text("a")), item(model.Item{}), item(done), eof, eof},
		},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, drain(t, open(t, &readyStream{steps: tc.in})))
		})
	}
}

// An error from the inner Recv after text was merged is returned by the
// next Recv, after the text; io.EOF before the terminal (a malformed
// stream) likewise.
func TestK23_AnErrorAfterMergedTextIsReturnedAfterIt(t *testing.T) {
	boom := errors.New("connection reset")
	s := open(t, &readyStream{steps: []step{ready(text("a")), ready(text("b")), {err: boom}, ready(done)}})
	it, err := s.Recv()
	require.NoError(t, err)
	require.Equal(t, text("ab"), it)
	_, err = s.Recv()
	require.ErrorIs(t, err, boom)
	require.Equal(t, []got{item(done), eof, eof}, drain(t, s), "after the error, Recv reads the inner stream again")

	s = open(t, &readyStream{steps: []step{ready(text("a")), ready(text("b"))}})
	require.Equal(t, []got{item(text("ab")), eof, eof}, drain(t, s))
}

// A panic of the inner stream after text was merged is raised by the next
// Recv, after the text, with the same value; so is a panic of Ready.
func TestK23_APanicAfterMergedTextIsRaisedAfterIt(t *testing.T) {
	s := open(t, &readyStream{steps: []step{ready(text("a")), ready(text("b")), readyPanic("boom"), ready(done)}})
	it, err := s.Recv()
	require.NoError(t, err)
	require.Equal(t, text("ab"), it)
	require.PanicsWithValue(t, "boom", func() { _, _ = s.Recv() })
	require.Equal(t, []got{item(done), eof, eof}, drain(t, s))

	s = open(t, &readyStream{steps: []step{ready(text("a")), ready(done)}, readyPanic: "ready"})
	it, err = s.Recv()
	require.NoError(t, err)
	require.Equal(t, text("a"), it)
	require.PanicsWithValue(t, "ready", func() { _, _ = s.Recv() })
}

// A stream without Ready is the inner stream itself, and an error from
// Stream is the inner provider's, with its retry advice.
func TestK23_AStreamWithoutReadyIsReturnedAsItIs(t *testing.T) {
	inner := &plainStream{s: readyStream{steps: []step{ready(text("a")), ready(text("b")), ready(done)}}}
	s := open(t, inner)
	require.Same(t, inner, s)
	require.Equal(t, []got{item(text("a")), item(text("b")), item(done), eof, eof}, drain(t, s))

	pe := must(model.NewProviderError(model.ProviderErrorConfig{
		Problem: problem.Must("rate_limited", "slow down"), Retryable: true}))
	p := must(coalesce.New(coalesce.Config{Provider: streams{err: pe}}))
	st, err := p.Stream(context.Background(), request(t))
	require.Nil(t, st)
	require.Same(t, pe, err)
}

// Close is forwarded once, with its error, whether or not an item is held.
func TestCloseIsForwarded(t *testing.T) {
	closeErr := errors.New("close")
	inner := &readyStream{steps: []step{ready(text("a")), ready(call), ready(done)}, closeErr: closeErr}
	s := open(t, inner)
	it, err := s.Recv()
	require.NoError(t, err)
	require.Equal(t, text("a"), it)
	require.ErrorIs(t, s.Close(), closeErr)
	require.Equal(t, 1, inner.closed)
}

// The decorated stream is itself truthful about Ready: a held item is
// returned without waiting.
func TestReadyOfTheDecoratedStream(t *testing.T) {
	s := open(t, &readyStream{steps: []step{ready(text("a")), ready(call), late(done)}})
	r, ok := s.(coalesce.Readier)
	require.True(t, ok)
	require.True(t, r.Ready())
	_, _ = s.Recv()
	require.True(t, r.Ready(), "the tool call is held")
	_, _ = s.Recv()
	require.False(t, r.Ready(), "the completed item is late")
}

func TestNewRefusesAMissingProvider(t *testing.T) {
	_, err := coalesce.New(coalesce.Config{})
	var be *bound.Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, "coalesce.provider", be.Field)
	require.Equal(t, bound.Required, be.Rule)
}

// Decorating a decorated provider changes nothing.
func TestNewDoesNotDecorateTwice(t *testing.T) {
	p := must(coalesce.New(coalesce.Config{Provider: streams{}}))
	require.Equal(t, p, must(coalesce.New(coalesce.Config{Provider: p})))
}
