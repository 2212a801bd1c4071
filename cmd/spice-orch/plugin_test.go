package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pinnedExample builds the example plugin and writes examples/plugin-pair.yaml
// with its real path and digest; it returns the spec's path and the pin.
func pinnedExample(t *testing.T) (specPath, plugin, sum string) {
	t.Helper()
	dir := t.TempDir()
	plugin = filepath.Join(dir, "wordcount")
	goTool, err := exec.LookPath("go")
	require.NoError(t, err)
	out, err := exec.Command(goTool, "build", "-o", plugin, "../../plugins/examples/wordcount").CombinedOutput()
	require.NoError(t, err, string(out))
	r := spiceOrch(t, env(t), "plugin", "digest", plugin)
	require.Equal(t, 0, r.code, r.stderr)
	sum = strings.TrimSpace(r.stdout)
	require.Len(t, sum, 64)
	b, err := os.ReadFile("../../examples/plugin-pair.yaml")
	require.NoError(t, err)
	s := strings.ReplaceAll(string(b), "/path/to/wordcount", plugin)
	s = strings.ReplaceAll(s, strings.Repeat("0", 64), sum)
	specPath = filepath.Join(dir, "plugin-pair.yaml")
	require.NoError(t, os.WriteFile(specPath, []byte(s), 0o600))
	return specPath, plugin, sum
}

func TestP4_PairPlaysWithAPluginToolAndCompiledToolsInOnePlan(t *testing.T) {
	t.Parallel()
	specPath, plugin, sum := pinnedExample(t)
	r := spiceOrch(t, env(t), "run", "--json", "--no-store", specPath)
	require.Equal(t, 0, r.code, r.stderr)
	ls := timeline(t, r.stdout)
	planID := field[string](t, ls[0].Payload, "plan_id")
	completed := map[string]string{}
	for _, l := range ls {
		switch l.Kind {
		case "run.started":
			require.Equal(t, planID, field[string](t, l.Relay.Payload, "plan_id"), "one leased plan")
		case "tool.completed":
			completed[field[string](t, l.Relay.Payload, "name")] = l.Relay.Worker
		}
	}
	require.Equal(t, map[string]string{"fs.write": "writer", "fs.read": "reviewer", "words.count": "reviewer"}, completed)
	require.Equal(t, "pair.completed", ls[len(ls)-1].Kind)

	// describe verifies and prints the manifest; a wrong pin is refused.
	r = spiceOrch(t, env(t), "plugin", "describe", "--sha256", sum, plugin)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "wordcount 1.0.0 (protocol 1)")
	require.Contains(t, r.stdout, "words.count")
	r = spiceOrch(t, env(t), "plugin", "describe", "--sha256", strings.Repeat("a", 64), plugin)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "digest mismatch")
	r = spiceOrch(t, env(t), "plugin", "digest", "wordcount")
	require.Equal(t, 2, r.code)

	// A pair whose pin is wrong does not start.
	b, err := os.ReadFile(specPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(specPath, []byte(strings.ReplaceAll(string(b), sum, strings.Repeat("b", 64))), 0o600))
	r = spiceOrch(t, env(t), "run", "--no-store", specPath)
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "plugins[0].sha256: does not match the file (its SHA-256 is "+sum+")")
}

func TestP6_PinRollsANewBuildForFutureRuns(t *testing.T) {
	t.Parallel()
	specPath, plugin, sum := pinnedExample(t)
	moved := filepath.Join(filepath.Dir(plugin), "wordcount-1.1")
	b, err := os.ReadFile(plugin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(moved, b, 0o755))

	// A build that fails verification changes nothing.
	before, err := os.ReadFile(specPath)
	require.NoError(t, err)
	r := spiceOrch(t, env(t), "plugin", "pin", "--sha256", strings.Repeat("c", 64), specPath, "0", moved)
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "is unchanged")
	after, err := os.ReadFile(specPath)
	require.NoError(t, err)
	require.Equal(t, before, after)

	r = spiceOrch(t, env(t), "plugin", "pin", specPath, "0", moved)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "pinned to wordcount 1.0.0 (sha256 "+sum)
	after, err = os.ReadFile(specPath)
	require.NoError(t, err)
	require.Contains(t, string(after), "path: "+moved+"\n")
	require.Contains(t, string(after), "# A review pair whose reviewer calls", "comments are kept")

	r = spiceOrch(t, env(t), "run", "--no-store", specPath)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `plugin wordcount-g1: wordcount 1.0.0, sha256 [0-9a-f]{12}, pid \d+, in plan plan-pair-\S+-1`, r.stdout)
	require.Contains(t, r.stdout, "words.count")
}
