//go:build unix

package conformance

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// goLauncher returns a launcher of the Go fixture built by TestMain.
func goLauncher(t *testing.T, env ...string) ProcessLauncher {
	t.Helper()
	b, err := os.ReadFile(goFixture)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return ProcessLauncher{Path: goFixture, SHA256: hex.EncodeToString(sum[:]), Env: env}
}

func TestP8_GoFixturePassesTheWholeSuite(t *testing.T) {
	start := time.Now()
	rs := runSuite(t, goLauncher(t))
	t.Logf("the Go conformance run took %v", time.Since(start).Round(time.Millisecond))
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Case
		require.Truef(t, r.Passed, "%s: %s", r.Case, r.Detail)
	}
	require.Equal(t, Names(), names, "every case ran, in the suite's order")
	require.True(t, Passed(rs))
}
