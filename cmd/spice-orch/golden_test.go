package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/pairdiff"
	"github.com/spice-orch/spice-orch/pairdiff/pairtest"
)

// The built-in pair and every example spec that runs offline keep the
// timeline of their golden file: a change of behaviour shows as the first
// divergence. Times and IDs are not compared (the CLI runs on the wall
// clock); `go test -run Golden -update` rewrites the files.
func TestO7_OfflinePairsMatchTheirGoldenTimelines(t *testing.T) {
	t.Parallel()
	cases := map[string]func(t *testing.T) []string{
		"builtin":     func(*testing.T) []string { return nil },
		"review-pair": func(*testing.T) []string { return []string{"../../examples/review-pair.yaml"} },
		"plugin-pair": func(t *testing.T) []string {
			specPath, _, _ := pinnedExample(t)
			return []string{specPath}
		},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			argv := append([]string{"run", "--json", "--no-store", "--workspace", t.TempDir()}, args(t)...)
			r := spiceOrch(t, env(t), argv...)
			require.Equal(t, 0, r.code, r.stderr)
			pairtest.Golden(t, filepath.Join("testdata", "golden", name+".jsonl"), []byte(r.stdout), pairdiff.Options{})
		})
	}
}
