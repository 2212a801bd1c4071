package store_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(crashEnv); path != "" {
		os.Exit(crashWriter(path))
	}
	if path := os.Getenv(ownerEnv); path != "" {
		os.Exit(ownerWriter(path))
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if benchRoot != "" {
			os.RemoveAll(benchRoot)
		}
		os.Exit(code)
	}))
}
