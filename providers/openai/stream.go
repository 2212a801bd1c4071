package openai

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"sync"
	"unicode/utf8"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// stream turns chunks into kernel items. It is read by one goroutine
// (model.Stream). Items wait in pending because one chunk may yield several
// (a split delta, the calls at the finish) or none (a role-only delta).
type stream struct {
	p      *Provider
	ctx    context.Context // the caller's: its end is cancellation
	actx   context.Context // the attempt's: its deadline is a timeout
	cancel context.CancelFunc
	body   bytes.Reader   // the request body, for this attempt
	res    *http.Response // the attempt's response, nil before it arrived
	sdk    source
	names  names
	op     string

	pending []model.Item
	first   [2]model.Item // pending's first backing: most chunks yield one item
	head    int
	done    bool  // the terminal item is in pending or was returned
	closed  bool  // the response is closed
	dropped bool  // Close was called
	err     error // sticky Recv error (cancellation, panic, ErrClosed)

	textLen int    // bytes of text received
	held    string // redacted text not yet emitted: it may begin the key
	argsLen int    // bytes of arguments assembled, emitted or not
	calls   []partialCall
	emitted int // tool calls emitted
	finish  string
	usage   model.Usage
	id      string
	model   string
	refusal bool
}

// Recv returns the next item; see model.Stream.
func (s *stream) Recv() (it model.Item, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.shutdown()
			s.err = errPanic
			it, err = model.Item{}, errPanic
		}
	}()
	if s.err != nil {
		return model.Item{}, s.err
	}
	if s.head == len(s.pending) && s.done {
		return model.Item{}, io.EOF
	}
	if s.dropped {
		return model.Item{}, ErrClosed
	}
	if err := s.ctx.Err(); err != nil {
		s.shutdown()
		s.err = err
		return model.Item{}, err
	}
	for s.head == len(s.pending) {
		s.advance()
		if s.err != nil {
			return model.Item{}, s.err
		}
	}
	it = s.pending[s.head]
	s.pending[s.head] = model.Item{}
	s.head++
	if s.head == len(s.pending) {
		s.pending, s.head = s.pending[:0], 0
	}
	return it, nil
}

// Ready reports whether the next Recv returns without waiting for the
// model: an item is pending, the stream has ended or failed, or a complete
// event has already been received. The events already received are
// decoded here, so that one that yields no item (a role or usage chunk)
// is not taken for one that does; Ready never reads the network.
func (s *stream) Ready() (ready bool) {
	defer func() {
		if r := recover(); r != nil {
			s.shutdown()
			s.err = errPanic
			ready = true
		}
	}()
	for {
		switch {
		case s.err != nil, s.head < len(s.pending), s.done, s.dropped, s.ctx.Err() != nil:
			return true
		case !s.sdk.received():
			return false
		}
		s.advance()
	}
}

// Close closes the response; it is idempotent and returns nil. Recv
// after Close returns io.EOF if the terminal item was already returned,
// else ErrClosed.
func (s *stream) Close() error {
	s.dropped = true
	s.shutdown()
	return nil
}

func (s *stream) shutdown() {
	if s.closed {
		return
	}
	s.closed = true
	_ = s.sdk.Close()
	s.cancel()
}

// advance reads one chunk, or ends the stream.
func (s *stream) advance() {
	if s.sdk.Next() {
		s.chunk(s.sdk.Current())
		return
	}
	err := s.sdk.Err()
	switch {
	case err == nil:
		s.end()
	case s.ctx.Err() != nil:
		s.shutdown()
		s.err = s.ctx.Err()
	default:
		s.fail(s.streamProblem(err))
	}
}

// streamProblem names a failure after the first chunk.
func (s *stream) streamProblem(err error) problem.Problem {
	var se *ssestream.StreamError
	var re *readError
	switch {
	case errors.Is(s.actx.Err(), context.DeadlineExceeded):
		return newProblem(CodeTimeout, "the stream did not end within "+s.p.s.timeout.String())
	case errors.As(err, &se):
		return newProblem(CodeUpstreamError, describe(s.p.parseErrorEvent(se.Event.Data)))
	case errors.Is(err, errTooLarge), errors.Is(err, bufio.ErrTooLong):
		return newProblem(CodeTooLarge, "the response exceeds the byte limit")
	case errors.As(err, &re):
		return newProblem(CodeConnectionLost, "the connection failed while streaming")
	}
	return newProblem(CodeMalformedChunk, "a stream chunk is not a valid chunk")
}

var problemBadChunk = problem.Must(CodeMalformedChunk, "a stream chunk has a field of the wrong type")

// chunk accounts for one chunk. Only choice 0 is read: the request never
// asks for more.
func (s *stream) chunk(c *chunk) {
	if c.bad {
		s.fail(problemBadChunk)
		return
	}
	if s.id == "" && len(c.id) > 0 {
		s.id = s.p.s.redact.redact(string(c.id))
	}
	if s.model == "" && len(c.model) > 0 {
		s.model = s.p.s.redact.redact(string(c.model))
	}
	if c.usage {
		u, err := model.NewUsage(c.prompt, c.output)
		if err != nil {
			s.fail(newProblem(CodeMalformedChunk, boundMessage("the usage is invalid", err)))
			return
		}
		s.usage = u
	}
	for i := range c.choices {
		ch := &c.choices[i]
		if ch.index != 0 {
			continue
		}
		if ch.bad {
			s.fail(problemBadChunk)
			return
		}
		if s.finish != "" && (len(ch.content) > 0 || len(ch.refusal) > 0 || len(ch.calls) > 0) {
			s.fail(newProblem(CodeMalformedChunk, "content arrived after the finish reason"))
			return
		}
		if len(ch.content) > 0 {
			s.text(string(ch.content))
		}
		if len(ch.refusal) > 0 {
			s.refusal = true
			s.text(string(ch.refusal))
		}
		for j := range ch.calls {
			if s.done {
				return
			}
			s.fragment(&ch.calls[j])
		}
		if len(ch.finish) > 0 && !s.done {
			s.finish = s.p.s.redact.redact(string(ch.finish))
			s.flushText()
			s.flushCalls()
		}
		if s.done {
			return
		}
	}
}

// text takes t after checking the aggregate bounds, and emits what the
// key cannot be part of: the key is replaced, and the end that may be the
// start of the key split over chunks waits for the next chunk (or the
// finish).
func (s *stream) text(t string) {
	if t == "" || s.done {
		return
	}
	total := s.textLen + len(t)
	if err := bound.Bytes("stream.text", total, bound.MaxTextPerOperation); err != nil {
		s.oversized(err)
		return
	}
	if err := bound.Bytes("stream.message", total+s.argsLen, bound.MaxMessageBytes); err != nil {
		s.oversized(err)
		return
	}
	s.textLen = total
	out := s.p.s.redact.redact(s.held + t)
	cut := s.p.s.redact.tail(out)
	s.held = out[cut:]
	s.emit(out[:cut])
}

// flushText emits the text held back.
func (s *stream) flushText() {
	t := s.held
	s.held = ""
	s.emit(t)
}

// emit emits t, split into deltas of at most bound.MaxTextDeltaBytes at
// rune boundaries.
func (s *stream) emit(t string) {
	for t != "" {
		n := len(t)
		if n > bound.MaxTextDeltaBytes {
			n = bound.MaxTextDeltaBytes
			for n > 0 && !utf8.RuneStart(t[n]) {
				n--
			}
		}
		it, err := model.TextDelta(t[:n])
		if err != nil { // the JSON decoder already made the text valid UTF-8
			s.fail(newProblem(CodeMalformedChunk, boundMessage("a text delta is invalid", err)))
			return
		}
		s.pending = append(s.pending, it)
		t = t[n:]
	}
}

func (s *stream) oversized(err error) {
	s.fail(newProblem(CodeOversized, boundMessage("the stream exceeds a kernel bound", err)))
}

// fail ends the stream with a Failed item and closes the response.
func (s *stream) fail(p problem.Problem) {
	if s.done {
		return
	}
	// Text held back because it may begin the key is kept when it is too
	// short to be a secret ("s", "sk-"), and dropped otherwise: a
	// failed stream's text is incomplete anyway.
	if held := s.held; len(held) < minKeyBytes {
		s.held = ""
		s.emit(held)
	}
	it, err := model.Failed(p)
	if err != nil { // p is never zero here
		it, _ = model.Failed(problem.Must(CodeInternal, "the provider built an invalid problem"))
	}
	s.pending = append(s.pending, it)
	s.done = true
	s.shutdown()
}

// end handles the server's end of the stream.
func (s *stream) end() {
	switch {
	case s.done:
		return
	case s.finish == "":
		s.fail(newProblem(CodeTruncated, "the stream ended before the model finished"))
	case s.textLen == 0 && s.emitted == 0:
		if s.finish == "content_filter" {
			s.fail(newProblem(CodeContentFiltered, "the model finished without output because of a content filter"))
			return
		}
		s.fail(newProblem(CodeEmptyResponse, "the model finished without text or tool calls"))
	default:
		s.flushText()
		s.pending = append(s.pending, model.Completed(s.usage, s.metadata()))
		s.done = true
		s.shutdown()
	}
}

// maxMetadataValue bounds each metadata string; a longer value is left out
// (metadata is optional, so leaving a field out loses nothing the kernel
// relies on).
const maxMetadataValue = 256

// metadata returns the "openai" metadata, or none when the server's values
// do not pass model.NewMetadata (which refuses anything credential-like).
// It is written as encoding/json would write the struct
// {id, model, finish_reason, refusal}, each field omitted when empty.
func (s *stream) metadata() model.Metadata {
	b := append(make([]byte, 0, 128), '{')
	b = appendMetadataField(b, "id", s.id)
	b = appendMetadataField(b, "model", s.model)
	b = appendMetadataField(b, "finish_reason", s.finish)
	if s.refusal {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, `"refusal":true`...)
	}
	b = append(b, '}')
	md, err := model.NewMetadata("openai", b)
	if err != nil {
		return model.Metadata{}
	}
	return md
}

// appendMetadataField writes "key":value unless value is empty or longer
// than maxMetadataValue.
func appendMetadataField(b []byte, key, value string) []byte {
	if value == "" || len(value) > maxMetadataValue {
		return b
	}
	if len(b) > 1 {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	b = append(b, `":`...)
	return appendString(b, value)
}

// source reads a response's chunks: the client library's SSE decoder
// frames the events (and bounds each line), chunkDecoder decodes them. It
// ends at "[DONE]" or the body's end, and turns an event with an "error"
// member into an *ssestream.StreamError, as the library's own stream does.
type source struct {
	dec  ssestream.Decoder // nil when the response had no body
	cd   chunkDecoder
	cur  *chunk
	err  error
	done bool

	body lines // the response body, as dec reads it
	// framed says dec is the library's own event-stream decoder, which
	// reads only when it holds no complete line: then every byte received
	// and not yet decoded is in body.
	framed bool
}

// open reads res's body through s.body.
func (s *source) open(res *http.Response) {
	s.body.rc = res.Body
	s.body.r.Reset(res.Body)
	res.Body = &s.body
	s.dec = ssestream.NewDecoder(res)
	s.framed = reflect.TypeOf(s.dec) == eventStreamDecoder()
}

// eventStreamDecoder is the type of the library's own decoder: the one it
// returns for a content type nobody registered a decoder for.
var eventStreamDecoder = sync.OnceValue(func() reflect.Type {
	return reflect.TypeOf(ssestream.NewDecoder(&http.Response{
		Header: http.Header{"Content-Type": {"application/x-spice-orch-probe"}}, Body: http.NoBody}))
})

// received reports whether Next returns without reading the network.
func (s *source) received() bool {
	return s.err != nil || s.done || s.dec == nil || s.framed && s.body.event()
}

var doneData = []byte("[DONE]")

// Next decodes the next chunk and reports whether there is one.
func (s *source) Next() bool {
	if s.err != nil || s.done || s.dec == nil {
		return false
	}
	if !s.dec.Next() {
		s.err = s.dec.Err()
		return false
	}
	ev := s.dec.Event()
	if bytes.HasPrefix(ev.Data, doneData) {
		s.done = true
		return false
	}
	c, err := s.cd.decode(ev.Data)
	switch {
	case err != nil:
		s.err = err
		return false
	case c.errorKey:
		// The message names no server bytes; readers parse Event.Data.
		s.err = &ssestream.StreamError{Message: "openai: received an error event while streaming", Event: ev}
		return false
	}
	s.cur = c
	return true
}

// Current returns the chunk Next decoded; it is valid until Next is called
// again.
func (s *source) Current() *chunk { return s.cur }

// Err returns what ended the stream early, nil at its normal end.
func (s *source) Err() error { return s.err }

// Close closes the response body.
func (s *source) Close() error {
	if s.dec == nil {
		return nil
	}
	return s.dec.Close()
}

// lines hands the response body to the decoder at most one line per Read,
// so that the decoder's scanner, which reads only when it holds no
// complete line, holds nothing beyond the event it returned: what was
// received and not yet decoded stays in r, where event can see it.
type lines struct {
	rc io.ReadCloser
	r  bufio.Reader
}

func (l *lines) Read(p []byte) (int, error) {
	if l.r.Buffered() == 0 {
		if _, err := l.r.Peek(1); err != nil {
			return 0, err
		}
	}
	b, _ := l.r.Peek(l.r.Buffered())
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	}
	n := copy(p, b)
	_, _ = l.r.Discard(n)
	return n, nil
}

func (l *lines) Close() error { return l.rc.Close() }

// event reports whether the bytes received and not yet decoded hold a
// complete event, by the library decoder's own rule: it returns an event
// at the first empty line after a "data" line, lines ending at "\n" with
// one "\r" before it dropped.
func (l *lines) event() bool {
	b, _ := l.r.Peek(l.r.Buffered())
	data := false
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false
		}
		line := bytes.TrimSuffix(b[:i], []byte("\r"))
		if len(line) == 0 && data {
			return true
		}
		if name, _, _ := bytes.Cut(line, []byte(":")); string(name) == "data" {
			data = true
		}
		b = b[i+1:]
	}
}
