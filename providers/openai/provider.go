package openai

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/spice-orch/spice-orch/kernel/model"
)

// Provider is a model.Provider for Chat Completions. It is immutable and
// safe for concurrent use.
type Provider struct {
	s settings
	// client sends the requests: auth, base URL, headers and middleware
	// are the library's; the body is requestBody's.
	client oai.Client
}

var _ model.Provider = (*Provider)(nil)

// New validates cfg and returns a provider. Every error is a *bound.Error
// naming the field ("openai.base_url"); none quotes the value.
func New(cfg Config) (*Provider, error) {
	s, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	opts := []option.RequestOption{
		option.WithBaseURL(s.baseURL.String()),
		option.WithHTTPClient(limited(s.client, s.maxBody)),
		// The retry policy is this package's, in Stream: one visible,
		// testable place that knows what the first chunk means.
		option.WithMaxRetries(0),
	}
	if s.apiKey != "" {
		opts = append(opts, option.WithAPIKey(s.apiKey))
	}
	// The client is built directly rather than through oai.NewClient,
	// which would read OPENAI_* variables behind the caller's back;
	// ConfigFromEnv is the one place the environment is read. Only its
	// options are used (Client.Post), none of its services.
	return &Provider{s: s, client: oai.Client{Options: opts}}, nil
}

// String describes the provider without its key.
func (p *Provider) String() string {
	return "openai.Provider{BaseURL: " + p.s.baseURL.Redacted() + "}"
}

// Format makes every fmt verb print String: the provider holds the key, and
// fmt would otherwise print unexported fields.
func (p *Provider) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, p.String()) }

// LogValue makes slog print String.
func (p *Provider) LogValue() slog.Value { return slog.StringValue(p.String()) }

// Stream sends req and returns the stream once its first chunk has
// arrived. Errors are *model.ProviderError; retryable ones were retried
// (see the package documentation) before Stream gave up.
func (p *Provider) Stream(ctx context.Context, req model.Request) (s model.Stream, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, providerError(CodeInternal, "the provider panicked before the stream", false, 0, errPanic)
		}
	}()
	if req.IsZero() {
		return nil, providerError(CodeInvalidRequest, "the request is empty", false, 0, nil)
	}
	body, ns, err := p.requestBody(req)
	if err != nil {
		return nil, providerError(CodeInvalidRequest, boundMessage("the request cannot be sent", err), false, 0, err)
	}
	for attempt := 1; ; attempt++ {
		st, pe := p.attempt(ctx, body, ns, req)
		if pe == nil {
			return st, nil
		}
		if !pe.Retryable() || attempt >= p.s.maxAttempts {
			return nil, afterAttempts(pe, attempt)
		}
		wait := pe.RetryAfter()
		if wait == 0 {
			wait = backoff(attempt, p.s.maxRetryWait)
		}
		if wait > p.s.maxRetryWait {
			return nil, afterAttempts(pe, attempt) // the caller decides whether to wait that long
		}
		if err := p.s.sleep(ctx, wait); err != nil {
			return nil, cancelled(ctx, err)
		}
	}
}

// backoff is the wait before retry n (1-based) when the server gave no
// advice: exponential from 500ms, at most 8s and limit, with equal jitter
// so that many clients do not retry in step.
func backoff(n int, limit time.Duration) time.Duration {
	d := min(500*time.Millisecond<<min(n-1, 4), 8*time.Second, limit)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// afterAttempts says in pe's problem how many attempts were made, when
// there was more than one: a timeout after three attempts is not a
// timeout after one.
func afterAttempts(pe *model.ProviderError, attempts int) *model.ProviderError {
	if attempts < 2 {
		return pe
	}
	pr := pe.Problem()
	return providerError(pr.Code(), pr.Message()+" (after "+strconv.Itoa(attempts)+" attempts)",
		pe.Retryable(), pe.RetryAfter(), errors.Unwrap(pe))
}

func cancelled(ctx context.Context, err error) *model.ProviderError {
	if cerr := ctx.Err(); cerr != nil {
		err = cerr
	}
	return providerError(CodeCancelled, "the request was cancelled", false, 0, err)
}

// exchange is what classify needs of one attempt's response.
type exchange struct {
	status      int
	contentType string
	retryAfter  time.Duration
}

func (p *Provider) exchange(res *http.Response) exchange {
	if res == nil {
		return exchange{}
	}
	return exchange{
		status:      res.StatusCode,
		contentType: res.Header.Get("Content-Type"),
		retryAfter:  retryAfter(res.Header, p.s.now()),
	}
}

// limitTransport bounds every response body: the client library reads
// error bodies whole, and a stream's event lines can grow to megabytes,
// before any of this package's checks could run. It wraps the HTTP
// client's transport once, in New, rather than being a per-request
// middleware, which would cost a handful of closures on every request.
type limitTransport struct {
	next    http.RoundTripper
	maxBody int64
}

func (t *limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(r)
	if res != nil && res.Body != nil {
		limit := t.maxBody
		if res.StatusCode >= 400 {
			limit = min(limit, maxErrorBody)
		}
		res.Body = &limitedBody{rc: res.Body, left: limit}
	}
	return res, err
}

// limited returns a shallow copy of c whose transport bounds response
// bodies.
func limited(c *http.Client, maxBody int64) *http.Client {
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	lc := *c
	lc.Transport = &limitTransport{next: next, maxBody: maxBody}
	return &lc
}

// maxErrorBody bounds an error response's body.
const maxErrorBody = 64 << 10

// limitedBody fails, rather than ends, a body that exceeds its limit, so
// an oversized response can never pass for a complete one.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, errTooLarge
		}
		return 0, wrapRead(err)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, wrapRead(err)
}

// readError marks a failure to read the response, so that it is told
// apart from a chunk that arrived but did not decode.
type readError struct{ err error }

func (e *readError) Error() string { return "openai: reading the response: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

func wrapRead(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return &readError{err: err}
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// attempt sends the request once and reads up to the first chunk. The
// stream is allocated first: its fields hold what the attempt needs (the
// response, the decoder), so one request costs one allocation here.
func (p *Provider) attempt(ctx context.Context, body []byte, ns names, req model.Request) (*stream, *model.ProviderError) {
	actx, cancel := context.WithTimeout(ctx, p.s.timeout)
	s := &stream{
		p: p, ctx: ctx, actx: actx, cancel: cancel,
		names: ns, op: string(req.Operation()),
	}
	s.pending = s.first[:0]
	// The library sends the request (auth, options, errors) and hands back
	// the response unread; source decodes only what the stream needs. A
	// *bytes.Reader is sent as it is, with its length and a GetBody that
	// rewinds it; a []byte would be boxed and wrapped again.
	s.body.Reset(body)
	err := p.client.Post(actx, "chat/completions", &s.body, &s.res)
	if err != nil {
		x := p.exchange(s.res)
		if s.res != nil && s.res.Body != nil {
			_ = s.res.Body.Close()
		}
		cancel()
		return nil, p.classify(ctx, actx, &x, err)
	}
	if s.res != nil && s.res.Body != nil {
		s.sdk.open(s.res)
	}
	if !s.sdk.Next() {
		x := p.exchange(s.res)
		err := s.sdk.Err()
		_ = s.sdk.Close()
		cancel()
		if err == nil {
			err = errEmptyStream
		}
		return nil, p.classify(ctx, actx, &x, err)
	}
	s.chunk(s.sdk.Current())
	return s, nil
}

// classify turns a failure before the first chunk into a ProviderError.
func (p *Provider) classify(ctx, actx context.Context, x *exchange, err error) *model.ProviderError {
	if ctx.Err() != nil {
		return cancelled(ctx, err)
	}
	if errors.Is(actx.Err(), context.DeadlineExceeded) {
		return providerError(CodeTimeout, "no first chunk within "+p.s.timeout.String(), true, 0, ErrTimeout)
	}
	if x.status >= 400 {
		e := &APIError{StatusCode: x.status}
		var apiErr *oai.Error
		if errors.As(err, &apiErr) {
			e.Type, e.Code, e.Message = p.sanitize(apiErr.Type), p.sanitize(apiErr.Code), p.sanitize(apiErr.Message)
		}
		code, retryable := statusProblem(x.status, e)
		return providerError(code, describe(e), retryable, x.retryAfter, e)
	}
	var se *ssestream.StreamError
	var re *readError
	switch {
	case errors.As(err, &se):
		e := p.parseErrorEvent(se.Event.Data)
		code, retryable := CodeUpstreamError, false
		if e.StatusCode != 0 {
			if c, r := statusProblem(e.StatusCode, e); r {
				code, retryable = c, true
			}
		} else if e.Type == "server_error" {
			retryable = true
		}
		return providerError(code, describe(e), retryable, 0, e)
	case errors.Is(err, errTooLarge), errors.Is(err, bufio.ErrTooLong):
		return providerError(CodeTooLarge, "the response exceeds the byte limit", false, 0, errTooLarge)
	case errors.Is(err, errEmptyStream):
		msg := "the stream ended before its first chunk"
		if ct := x.contentType; !strings.HasPrefix(ct, "text/event-stream") {
			// A server that ignores "stream": true answers with JSON.
			msg += "; the response is not an event stream (Content-Type " + strconv.Quote(p.sanitize(ct)) + ")"
		}
		return providerError(CodeEmptyStream, msg, false, 0, err)
	case x.status != 0 && !errors.As(err, &re):
		// The response arrived and an event was read, but it did not
		// decode. The decoder's error is not kept: its text may quote
		// bytes of the response.
		return providerError(CodeMalformed, "the first chunk is not a valid chunk", false, 0, nil)
	}
	// A transport failure: refused, reset, or closed before the first
	// chunk. Its text holds only the URL, which carries no key.
	return providerError(CodeConnectionFailed, "the connection failed before the first chunk", true, 0, err)
}
