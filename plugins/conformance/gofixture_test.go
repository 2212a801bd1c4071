//go:build unix

package conformance

import (
	"context"
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

// A startup error of serve.Run must end the fixture in every mode: had
// ignore_shutdown slept after it, a refused protocol offer would read as a
// silent start, and a row of misbehaviours would see a launch timeout.
func TestP8_GoFixtureIgnoringShutdownExitsOnAStartupError(t *testing.T) {
	l := goLauncher(t, "SPICE_FIXTURE_MODE=ignore_shutdown")
	l.StartTimeout, l.StopGrace = 5*time.Second, 500*time.Millisecond
	_, err := l.Launch(context.Background(), LaunchConfig{Protocols: "0"})
	require.ErrorIs(t, err, ErrExited)
	require.ErrorContains(t, err, "fixture:", "the fixture's last log line says why")
}
