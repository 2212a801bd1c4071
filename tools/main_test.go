package tools_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The concurrency tests start goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
