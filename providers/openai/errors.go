package openai

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// Problem codes of the errors and Failed items this provider produces.
const (
	// Before the stream (*model.ProviderError).
	CodeBadRequest       = "bad_request"        // 400
	CodeUnauthorized     = "unauthorized"       // 401
	CodeForbidden        = "forbidden"          // 403
	CodeNotFound         = "not_found"          // 404, usually an unknown model
	CodeRequestTimeout   = "request_timeout"    // 408
	CodeConflict         = "conflict"           // 409
	CodeRequestTooLarge  = "request_too_large"  // 413
	CodeUnprocessable    = "unprocessable"      // 422
	CodeRateLimited      = "rate_limited"       // 429
	CodeQuotaExceeded    = "quota_exceeded"     // 429 insufficient_quota, not retryable
	CodeServerError      = "server_error"       // 5xx
	CodeHTTPError        = "http_error"         // any other status >= 400
	CodeConnectionFailed = "connection_failed"  // no response or no first chunk
	CodeMalformed        = "malformed_response" // the first chunk is not a chunk
	CodeEmptyStream      = "empty_stream"       // the stream ended before its first chunk
	CodeCancelled        = "cancelled"          // the caller's context ended
	CodeInvalidRequest   = "invalid_request"    // the request cannot be sent (tool names)
	CodeInternal         = "internal_error"     // a panic inside the provider

	// Either side of the first chunk.
	CodeTimeout       = "timeout"            // Config.Timeout ran out
	CodeTooLarge      = "response_too_large" // Config.MaxResponseBytes
	CodeUpstreamError = "upstream_error"     // the server sent an error event

	// After the first chunk (Failed items).
	CodeMalformedChunk  = "malformed_chunk"
	CodeConnectionLost  = "connection_lost"
	CodeOversized       = "stream_oversized"  // a kernel bound would be exceeded
	CodeInvalidToolCall = "invalid_tool_call" // a call the kernel cannot accept
	CodeTruncated       = "stream_truncated"  // the stream ended before the model finished
	CodeEmptyResponse   = "empty_response"    // the model finished with nothing
	CodeContentFiltered = "content_filtered"  // the model finished with nothing because of a filter
)

var (
	// ErrTimeout is the cause of a ProviderError whose attempt ran out of
	// Config.Timeout. It is distinct from context.DeadlineExceeded so that
	// nobody mistakes it for the caller's own deadline.
	ErrTimeout = errors.New("openai: attempt timed out")
	// ErrClosed is what Recv returns after Close, before a terminal item.
	ErrClosed = errors.New("openai: stream closed")

	errTooLarge    = errors.New("openai: response exceeds the byte limit")
	errEmptyStream = errors.New("openai: stream ended before its first chunk")
	errPanic       = errors.New("openai: panic inside the provider")
)

// APIError is the cause of a ProviderError (and the source of a Failed
// item's message) when the server answered with an error: its HTTP status
// (0 for an error event inside a stream without one) and the error's type,
// code and message. Message has every occurrence of the API key replaced
// and is bounded; the client library's own error, which holds the HTTP
// request and its headers, is not kept.
type APIError struct {
	StatusCode int
	Type       string
	Code       string
	Message    string
}

func (e *APIError) Error() string {
	s := "openai: "
	if e.StatusCode != 0 {
		s += "HTTP " + strconv.Itoa(e.StatusCode)
	} else {
		s += "error event"
	}
	if tag := e.tag(); tag != "" {
		s += " (" + tag + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

func (e *APIError) tag() string {
	switch {
	case e.Code != "" && e.Type != "":
		return e.Type + "/" + e.Code
	case e.Code != "":
		return e.Code
	}
	return e.Type
}

// maxServerMessage bounds what a problem quotes of a server's message.
const maxServerMessage = 1 << 10

// sanitize makes a server's text safe to record: the API key replaced, valid
// UTF-8, no control characters, and bounded with a visible marker (it is a
// diagnostic, not data the kernel carries).
func (p *Provider) sanitize(s string) string {
	// A server may echo the key in another case ("invalid key SK-ABC…")
	// or encoded: any of those is the key.
	s = p.s.redact.redact(s)
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) > maxServerMessage {
		cut := maxServerMessage
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// wireError is the "error" object of an error body or error event. Code is
// a string at OpenAI and a number at some compatible servers.
type wireError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// parseErrorEvent reads {"error":{...}} from an event's data.
func (p *Provider) parseErrorEvent(data []byte) *APIError {
	var body struct {
		Error wireError `json:"error"`
	}
	_ = json.Unmarshal(data, &body) // a malformed event still is an error event
	e := &APIError{
		Type:    p.sanitize(body.Error.Type),
		Message: p.sanitize(body.Error.Message),
	}
	var code string
	if json.Unmarshal(body.Error.Code, &code) == nil {
		e.Code = p.sanitize(code)
	} else if n, err := strconv.Atoi(string(body.Error.Code)); err == nil {
		e.Code = strconv.Itoa(n)
		if n >= 400 && n <= 599 {
			e.StatusCode = n // OpenRouter reports the upstream status this way
		}
	}
	return e
}

// statusProblem classifies an HTTP error status.
func statusProblem(status int, e *APIError) (code string, retryable bool) {
	switch {
	case status == http.StatusBadRequest:
		return CodeBadRequest, false
	case status == http.StatusUnauthorized:
		return CodeUnauthorized, false
	case status == http.StatusForbidden:
		return CodeForbidden, false
	case status == http.StatusNotFound:
		return CodeNotFound, false
	case status == http.StatusRequestTimeout:
		return CodeRequestTimeout, true
	case status == http.StatusConflict:
		return CodeConflict, true
	case status == http.StatusRequestEntityTooLarge:
		return CodeRequestTooLarge, false
	case status == http.StatusUnprocessableEntity:
		return CodeUnprocessable, false
	case status == http.StatusTooManyRequests:
		// Out of credit: waiting does not help.
		if e != nil && (e.Code == "insufficient_quota" || e.Type == "insufficient_quota") {
			return CodeQuotaExceeded, false
		}
		return CodeRateLimited, true
	case status >= 500:
		return CodeServerError, true
	}
	return CodeHTTPError, false
}

// describe is the problem message for an API error.
func describe(e *APIError) string {
	s := "the server answered"
	if e.StatusCode != 0 {
		s += " HTTP " + strconv.Itoa(e.StatusCode)
		if t := http.StatusText(e.StatusCode); t != "" {
			s += " " + t
		}
	} else {
		s += " with an error event"
	}
	if tag := e.tag(); tag != "" {
		s += " (" + tag + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// newProblem builds a problem from parts this package controls. The code
// is one of the constants above and the message is bounded by sanitize,
// so an error here is a bug; it degrades to a fixed problem rather than
// panicking in a caller's goroutine.
func newProblem(code, msg string) problem.Problem {
	p, err := problem.New(code, msg)
	if err != nil {
		return problem.Must(CodeInternal, "the provider built an invalid problem")
	}
	return p
}

// providerError returns a ProviderError; advice is dropped unless the
// error is retryable, and bounded by model.MaxRetryAfter.
func providerError(code, msg string, retryable bool, after time.Duration, cause error) *model.ProviderError {
	if !retryable || after < 0 {
		after = 0
	}
	after = min(after, model.MaxRetryAfter)
	pe, err := model.NewProviderError(model.ProviderErrorConfig{
		Problem: newProblem(code, msg), Retryable: retryable, RetryAfter: after, Cause: cause,
	})
	if err != nil { // unreachable: the inputs were bounded above
		pe, _ = model.NewProviderError(model.ProviderErrorConfig{
			Problem: problem.Must(CodeInternal, "the provider built an invalid error"), Cause: cause,
		})
	}
	return pe
}

// retryAfter reads the server's advice: retry-after-ms (OpenAI), then
// Retry-After in seconds or as an HTTP date. Unusable values mean none;
// longer ones are capped at model.MaxRetryAfter.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return capped(ms, time.Millisecond)
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 {
			return capped(s, time.Second)
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, model.MaxRetryAfter)
		}
	}
	return 0
}

// capped converts n units to a duration no longer than model.MaxRetryAfter,
// without overflowing (n may be +Inf).
func capped(n float64, unit time.Duration) time.Duration {
	if n >= float64(model.MaxRetryAfter/unit) {
		return model.MaxRetryAfter
	}
	return time.Duration(n * float64(unit))
}

// boundMessage renders a *bound.Error for a problem; bound errors never
// quote values, so this is safe to record.
func boundMessage(prefix string, err error) string {
	var be *bound.Error
	if errors.As(err, &be) {
		return prefix + ": " + be.Error()
	}
	return prefix
}

// replaceFold replaces every occurrence of old in s, compared without
// regard to ASCII case, with new.
func replaceFold(s, old, new string) string {
	var b strings.Builder
	last := 0
	for i := 0; i+len(old) <= len(s); {
		if !asciiEqualFold(s[i:i+len(old)], old) {
			i++
			continue
		}
		b.WriteString(s[last:i])
		b.WriteString(new)
		i += len(old)
		last = i
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func asciiEqualFold(a, b string) bool {
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
