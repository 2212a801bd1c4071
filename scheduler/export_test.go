package scheduler

import "testing"

// SetDrainedHook runs f after each drain's commit, before its jobs leave
// the submission buffer, until the test ends. Set it before New.
func SetDrainedHook(t testing.TB, f func()) {
	testHookDrained = f
	t.Cleanup(func() { testHookDrained = nil })
}
