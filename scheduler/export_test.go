package scheduler

import (
	"context"
	"testing"
)

// SetJobContext makes f the maker of every job's context, in place of
// context.WithCancel, until the test ends. Set it before New.
func SetJobContext(t testing.TB, f func(context.Context) (context.Context, context.CancelFunc)) {
	testHookJobContext = f
	t.Cleanup(func() { testHookJobContext = nil })
}
