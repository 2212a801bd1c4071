package model

import (
	"context"
	"time"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// Provider answers model requests with streams. Providers are trusted,
// concurrent, long-lived values: Stream may be called from many runs at
// once.
//
// Stream starts one model operation. ctx governs the whole stream: when it
// is cancelled, Recv must return promptly. An error returned here means no
// stream exists and nothing was observed; it should be a *ProviderError,
// whose retry advice a caller may follow. Any other error is treated as a
// definitive, non-retryable failure, and a context error as cancellation
// only when the caller's own context says so.
type Provider interface {
	Stream(ctx context.Context, req Request) (Stream, error)
}

// Stream is one model operation's answer, read by one goroutine.
//
// The contract (K23):
//   - Recv returns items in order. Every stream ends with exactly one
//     terminal item, Completed or Failed; after it Recv returns io.EOF, and
//     keeps returning io.EOF.
//   - Every item is a valid Item built by this package's constructors; the
//     zero Item, a second terminal, anything after the terminal, or io.EOF
//     before the terminal make the stream malformed. Per-item and aggregate
//     limits (bound.MaxTextDeltaBytes, bound.MaxTextPerOperation,
//     bound.MaxToolCallsPerOperation, unique call IDs) apply; Assembler
//     enforces them.
//   - A Recv error other than io.EOF is a stream failure. A stream that
//     produced any item, including a Failed item, is never retried as if
//     nothing had happened: only errors from Provider.Stream carry retry
//     advice.
//   - Close releases the stream's resources. The caller calls it exactly
//     once, after it stops calling Recv, whether or not the stream ended;
//     Close after io.EOF returns nil.
type Stream interface {
	Recv() (Item, error)
	Close() error
}

// MaxRetryAfter bounds the retry advice a provider may give.
const MaxRetryAfter = 10 * time.Minute

// ProviderErrorConfig is the input to NewProviderError.
type ProviderErrorConfig struct {
	// Problem says what went wrong, in words safe to show and record.
	Problem problem.Problem
	// Retryable says that the same request may succeed if sent again.
	Retryable bool
	// RetryAfter is how long to wait before retrying: 0..MaxRetryAfter,
	// and only for a retryable error. Zero means "no advice".
	RetryAfter time.Duration
	// Cause is the underlying error, reachable with errors.Is and
	// errors.As (so context.Canceled and context.DeadlineExceeded keep
	// their meaning) but never part of Error, since its text may hold
	// URLs, headers or response bodies.
	Cause error
}

// ProviderError is the typed error a Provider returns from Stream, before
// any stream exists. It is immutable.
type ProviderError struct {
	problem    problem.Problem
	retryable  bool
	retryAfter time.Duration
	cause      error
}

// NewProviderError validates cfg and returns the error.
func NewProviderError(cfg ProviderErrorConfig) (*ProviderError, error) {
	if cfg.Problem.IsZero() {
		return nil, bound.Missing("provider_error.problem")
	}
	switch {
	case cfg.RetryAfter < 0:
		return nil, bound.Malformedf("provider_error.retry_after", "must not be negative")
	case cfg.RetryAfter > MaxRetryAfter:
		return nil, &bound.Error{
			Field: "provider_error.retry_after", Rule: bound.TooLarge,
			Limit: int(MaxRetryAfter / time.Millisecond), Got: int(cfg.RetryAfter / time.Millisecond),
			Detail: "milliseconds",
		}
	case cfg.RetryAfter > 0 && !cfg.Retryable:
		return nil, bound.Conflicting("provider_error.retry_after", "only a retryable error has retry advice")
	}
	return &ProviderError{
		problem:    cfg.Problem,
		retryable:  cfg.Retryable,
		retryAfter: cfg.RetryAfter,
		cause:      cfg.Cause,
	}, nil
}

// Error returns the problem and the retry advice, never the cause.
func (e *ProviderError) Error() string {
	s := "model provider: " + e.problem.String()
	if e.retryable {
		s += " (retryable"
		if e.retryAfter > 0 {
			s += " after " + e.retryAfter.String()
		}
		s += ")"
	}
	return s
}

// Unwrap returns the cause.
func (e *ProviderError) Unwrap() error { return e.cause }

// Problem returns what went wrong.
func (e *ProviderError) Problem() problem.Problem { return e.problem }

// Retryable reports whether the same request may succeed if sent again.
func (e *ProviderError) Retryable() bool { return e.retryable }

// RetryAfter returns the advised wait before a retry; 0 means no advice.
func (e *ProviderError) RetryAfter() time.Duration { return e.retryAfter }
