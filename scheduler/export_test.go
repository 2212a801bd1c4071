package scheduler

import (
	"context"
	"testing"
)

// SetDrainedHook runs f after each drain's commit, before its jobs leave
// the submission buffer, until the test ends. Set it before New.
func SetDrainedHook(t testing.TB, f func()) {
	testHookDrained = f
	t.Cleanup(func() { testHookDrained = nil })
}

// SetJobContext makes f the maker of every slot's context, in place of
// context.WithCancel, until the test ends. Set it before New.
func SetJobContext(t testing.TB, f func(context.Context) (context.Context, context.CancelFunc)) {
	testHookJobContext = f
	t.Cleanup(func() { testHookJobContext = nil })
}
