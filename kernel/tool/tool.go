package tool

import (
	"context"
	"iter"
)

// Tool is an executable tool. Tools are trusted, concurrent, long-lived
// values: Execute may be called from many runs at once.
//
// Execute returns either a valid Result correlated with call, or a zero
// Result and exactly one direct *ExecutionError correlated with call (K7).
// A tool must not use the Reporter after Execute returns (K9).
type Tool interface {
	Definition() Definition
	Execute(ctx context.Context, call Call, r Reporter) (Result, error)
}

// Reporter receives progress while a call runs. Its error tells the tool
// that progress could not be recorded; the tool may ignore it.
type Reporter interface {
	Report(ctx context.Context, p Progress) error
}

// Dispatcher runs calls. It publishes an immutable snapshot of the
// definitions it serves, taken at construction (K6), and rejects any call
// whose name is not in that snapshot.
type Dispatcher interface {
	// Definitions yields the frozen definitions in name order.
	Definitions() iter.Seq[Definition]
	// Lookup returns the definition named name.
	Lookup(name string) (Definition, bool)
	// Dispatch runs call and returns a validated outcome: a Result, or an
	// error that is an *ExecutionError, a *DispatchFailure or a
	// *bound.Error / ErrUnknownTool for calls rejected before execution.
	Dispatch(ctx context.Context, call Call, r Reporter) (Result, error)
}
