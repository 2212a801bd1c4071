package coalesce_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The engine tests start runs on their own goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
