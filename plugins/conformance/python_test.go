//go:build unix

package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pythonFixture returns a launcher of the Python fixture, made by
// `make plugins-venv`. It skips, loudly, only when no Python 3.12 exists.
func pythonFixture(t *testing.T, env ...string) ProcessLauncher {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	py, err := exec.Command(filepath.Join(root, "plugins/fixtures/python/find-python3.12")).Output()
	require.NoError(t, err)
	if strings.TrimSpace(string(py)) == "" {
		msg := "*** SKIPPING the Python plugin conformance run: python3.12 not found ***"
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
	}
	path := filepath.Join(root, ".venv-plugins/bin/spice-plugin-fixture-python")
	b, err := os.ReadFile(path)
	require.NoError(t, err, "the Python fixture's venv is missing: run `make plugins-venv`")
	sum := sha256.Sum256(b)
	return ProcessLauncher{Path: path, SHA256: hex.EncodeToString(sum[:]), Env: env}
}

func runSuite(t *testing.T, l Launcher, only ...string) []Result {
	t.Helper()
	return runSuiteWith(t, Config{Launcher: l, Only: only})
}

func runSuiteWith(t *testing.T, cfg Config) []Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, err := Run(ctx, cfg)
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, WriteTable(&b, rs))
	t.Log("\n" + b.String())
	return rs
}

func TestP8_PythonFixturePassesTheWholeSuite(t *testing.T) {
	start := time.Now()
	rs := runSuite(t, pythonFixture(t))
	t.Logf("the Python conformance run took %v", time.Since(start).Round(time.Millisecond))
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Case
		require.Truef(t, r.Passed, "%s: %s", r.Case, r.Detail)
	}
	require.Equal(t, Names(), names, "every case ran, in the suite's order")
	require.True(t, Passed(rs))
}
