package plan_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Release runs callbacks on their own goroutine; none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
