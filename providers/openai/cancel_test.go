package openai_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/providers/openai"
)

// promptly bounds how long a cancelled call may take. It only fails a
// broken provider; a working one returns in microseconds.
const promptly = 5 * time.Second

type recvResult struct {
	it  model.Item
	err error
}

func recvAsync(s model.Stream) <-chan recvResult {
	ch := make(chan recvResult, 1)
	go func() {
		it, err := s.Recv()
		ch <- recvResult{it, err}
	}()
	return ch
}

func TestSlowStreamCancelledMidway(t *testing.T) {
	r := newReplay(t, slowTranscript(t, "slow.http"))
	p, _ := r.provider(t)
	ignore := goleak.IgnoreCurrent()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := p.Stream(ctx, request(t))
	require.NoError(t, err)
	it, err := s.Recv()
	require.NoError(t, err)
	require.Equal(t, text("Thinking"), it)

	pending := recvAsync(s) // blocks: the server holds the stream open
	cancel()
	select {
	case res := <-pending:
		require.ErrorIs(t, res.err, context.Canceled)
		require.True(t, res.it.IsZero())
	case <-time.After(promptly):
		t.Fatal("Recv did not return after cancellation")
	}
	_, err = s.Recv()
	require.ErrorIs(t, err, context.Canceled, "the cancellation is sticky")
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")

	r.srv.Close()
	goleak.VerifyNone(t, ignore)
	require.Equal(t, 1, r.count(), "a cancelled stream is not retried")
}

func TestCancelBeforeFirstChunk(t *testing.T) {
	arrived := make(chan struct{})
	r := newReplay(t, func(w http.ResponseWriter, req *http.Request) {
		close(arrived)
		holdBeforeHeaders(w, req)
	})
	p, sl := r.provider(t)
	ignore := goleak.IgnoreCurrent()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Stream(ctx, request(t))
		done <- err
	}()
	select { // the request is in flight once the server saw it
	case <-arrived:
	case err := <-done:
		t.Fatalf("Stream returned early: %v", err)
	case <-time.After(promptly):
		t.Fatal("the request never arrived")
	}
	cancel()
	select {
	case err := <-done:
		pe := providerError(t, err)
		require.Equal(t, "cancelled", pe.Problem().Code())
		require.False(t, pe.Retryable())
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(promptly):
		t.Fatal("Stream did not return after cancellation")
	}
	require.Empty(t, sl.waits())
	r.srv.Close()
	goleak.VerifyNone(t, ignore)
}

func TestCancelDuringRetryWait(t *testing.T) {
	r := newReplay(t, transcript(t, "error_503.http"))
	ctx, cancel := context.WithCancel(context.Background())
	p, _ := r.provider(t, func(c *openai.Config) {
		c.Sleep = func(ctx context.Context, _ time.Duration) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}
	})
	_, err := p.Stream(ctx, request(t))
	pe := providerError(t, err)
	require.Equal(t, "cancelled", pe.Problem().Code())
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, r.count())
}

func TestCloseWithoutReadingReleasesTheConnection(t *testing.T) {
	r := newReplay(t, slowTranscript(t, "slow.http"))
	p, _ := r.provider(t)
	ignore := goleak.IgnoreCurrent()
	s, err := p.Stream(context.Background(), request(t))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = s.Recv()
	require.ErrorIs(t, err, openai.ErrClosed)
	r.srv.Close()
	goleak.VerifyNone(t, ignore)

	// Items already decoded are not handed out after Close either.
	r2 := newReplay(t, sseBody(`{"choices":[{"index":0,"delta":{"content":"buffered"}}]}`))
	p2, _ := r2.provider(t)
	s, err = p2.Stream(context.Background(), request(t))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = s.Recv()
	require.ErrorIs(t, err, openai.ErrClosed)
}

func TestRecvAfterTerminalKeepsReturningEOF(t *testing.T) {
	r := newReplay(t, transcript(t, "text.http"))
	p, _ := r.provider(t)
	s, err := p.Stream(context.Background(), request(t))
	require.NoError(t, err)
	for {
		it, err := s.Recv()
		require.NoError(t, err)
		if it.IsTerminal() {
			break
		}
	}
	require.NoError(t, s.Close())
	for range 3 {
		_, err := s.Recv()
		require.ErrorIs(t, err, io.EOF)
	}
}
