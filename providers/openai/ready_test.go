package openai_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/providers/openai"
)

// readier is the optional method a stream offers to a decorator that
// merges text deltas.
type readier interface{ Ready() bool }

// event is one server-sent event of a Chat Completions stream of content.
func event(content, finish string) string {
	fr := "null"
	if finish != "" {
		fr = `"` + finish + `"`
	}
	delta := `{}`
	if content != "" {
		delta = `{"content":"` + content + `"}`
	}
	return `data: {"id":"chatcmpl-r","object":"chat.completion.chunk","model":"gpt-4o-mini",` +
		`"choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + fr + `}]}` + "\n\n"
}

// Ready is true for the items of chunks already received, and false when
// the next item has not been sent yet; the next Recv then waits for it.
func TestS1_ReadyIsTrueOnlyForWhatWasReceived(t *testing.T) {
	second, third := make(chan struct{}), make(chan struct{})
	r := newReplay(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		// Three chunks in one write: they arrive together.
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n"+
			event("Hel", "")+event("lo", "")+": keep-alive\n\n"+event(", ", ""))
		f.Flush()
		select {
		case <-second:
		case <-req.Context().Done():
			return
		}
		_, _ = io.WriteString(w, event("world", ""))
		f.Flush()
		select {
		case <-third:
		case <-req.Context().Done():
			return
		}
		_, _ = io.WriteString(w, event("", "stop")+"data: [DONE]\n\n")
		f.Flush()
	})
	p, _ := r.provider(t)
	s, err := p.Stream(context.Background(), request(t))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	rd, ok := s.(readier)
	require.True(t, ok, "the stream has Ready")

	recv := func(want model.Item) {
		t.Helper()
		it, err := s.Recv()
		require.NoError(t, err)
		require.Equal(t, want, it)
	}
	require.True(t, rd.Ready())
	recv(text("Hel"))
	require.True(t, rd.Ready())
	recv(text("lo"))
	require.True(t, rd.Ready(), "a comment between the events changes nothing")
	recv(text(", "))
	require.False(t, rd.Ready(), "the server has not sent the next chunk")
	require.False(t, rd.Ready(), "asking again reads nothing")
	close(second)
	recv(text("world"))
	require.False(t, rd.Ready())
	close(third)
	recv(completed(0, 0, `{"id":"chatcmpl-r","model":"gpt-4o-mini","finish_reason":"stop"}`))
	require.True(t, rd.Ready(), "io.EOF is at hand")
	_, err = s.Recv()
	require.ErrorIs(t, err, io.EOF)
}

// otherDecoder is a decoder registered in place of the library's own, for
// a content type of its own.
type otherDecoder struct{ ssestream.Decoder }

// With a decoder other than the library's own, whose buffering the
// provider cannot see, Ready reports only the items already pending.
func TestS1_ReadyWithAnotherDecoderReportsOnlyPendingItems(t *testing.T) {
	const contentType = "text/x-spice-orch-ready-test"
	ssestream.RegisterDecoder(contentType, func(rc io.ReadCloser) ssestream.Decoder {
		return otherDecoder{ssestream.NewDecoder(&http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: rc})}
	})
	r := newReplay(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = io.WriteString(w, event("Hel", "")+event("lo", "")+event("", "stop")+"data: [DONE]\n\n")
	})
	p, _ := r.provider(t)
	s, err := p.Stream(context.Background(), request(t))
	require.NoError(t, err)
	rd := s.(readier)
	require.True(t, rd.Ready(), "the first chunk's item is pending")
	it, err := s.Recv()
	require.NoError(t, err)
	require.Equal(t, text("Hel"), it)
	require.False(t, rd.Ready())
	items, err := drain(t, s)
	require.NoError(t, err)
	require.Equal(t, []model.Item{text("lo"), completed(0, 0, `{"id":"chatcmpl-r","model":"gpt-4o-mini","finish_reason":"stop"}`)}, items)
}

// gatedBody serves a body in pieces, and notes a Read made while reads
// were not allowed.
type gatedBody struct {
	pieces  [][]byte
	allowed bool
	waited  bool
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if !b.allowed {
		b.waited = true
	}
	if len(b.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.pieces[0])
	if b.pieces[0] = b.pieces[0][n:]; len(b.pieces[0]) == 0 {
		b.pieces = b.pieces[1:]
	}
	return n, nil
}

func (b *gatedBody) Close() error { return nil }

// split cuts body into pieces at the offsets cuts gives (each byte of cuts
// is the length of the next piece, 0 meaning 1), the rest in one piece.
func split(body, cuts []byte) [][]byte {
	var out [][]byte
	for _, c := range cuts {
		if len(body) == 0 {
			break
		}
		n := min(max(int(c), 1), len(body))
		out = append(out, body[:n])
		body = body[n:]
	}
	if len(body) > 0 {
		out = append(out, body)
	}
	return out
}

// FuzzReadyNeverWaits feeds arbitrary bodies (at most 64 KiB), cut into
// arbitrary pieces as a network would deliver them, to a stream whose
// reader asks Ready before every Recv. Neither Ready nor a Recv after
// Ready said true may read the body; and asking Ready changes nothing Recv
// returns.
func FuzzReadyNeverWaits(f *testing.F) {
	for _, body := range transcriptBodies(f) {
		f.Add(body, []byte{})
		f.Add(body, []byte{1, 7, 200, 3, 255, 64, 2})
		f.Add(body, bytes.Repeat([]byte{1}, 64))
	}
	f.Add([]byte(event("a", "")+event("b", "")+"\r\n"+event("c", "")+"data: x\r\n\r\n"), []byte{90, 1, 1})
	f.Add([]byte("event: e\n\n\ndata\n\n"+event("a", "stop")+"data: [DONE]\n\n"), []byte{5})
	f.Fuzz(func(t *testing.T, body, cuts []byte) {
		if len(body) > 64<<10 {
			t.Skip()
		}
		open := func(gb *gatedBody) model.Stream {
			client := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
					Body: gb, Request: r}, nil
			})}
			p, err := openai.New(openai.Config{APIKey: testKey, BaseURL: "http://fuzz.invalid/v1", HTTPClient: client, MaxAttempts: 1})
			require.NoError(t, err)
			s, err := p.Stream(context.Background(), request(t))
			if err != nil {
				return nil
			}
			return s
		}
		plain := open(&gatedBody{pieces: split(body, cuts), allowed: true})
		if plain == nil {
			return
		}
		want, wantErr := drain(t, plain)

		gb := &gatedBody{pieces: split(body, cuts), allowed: true}
		s := open(gb)
		require.NotNil(t, s, "the first chunk decodes as it did")
		rd := s.(readier)
		var got []model.Item
		var gotErr error
		for range 100000 {
			gb.allowed = false
			ready := rd.Ready()
			require.False(t, gb.waited, "Ready read the body")
			gb.allowed = !ready
			it, err := s.Recv()
			require.False(t, gb.waited, "Recv read the body after Ready said true")
			if err == io.EOF {
				break
			}
			if err != nil {
				gotErr = err
				break
			}
			got = append(got, it)
		}
		require.NoError(t, s.Close())
		require.Equal(t, want, got)
		require.Equal(t, wantErr, gotErr)
	})
}
