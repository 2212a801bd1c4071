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
	cases := map[string]struct {
		code int // final-answer ends max_rounds, as it should
		args func(t *testing.T) []string
	}{
		"builtin":      {0, func(*testing.T) []string { return nil }},
		"review-pair":  {0, func(*testing.T) []string { return []string{"../../examples/review-pair.yaml"} }},
		"final-answer": {1, func(*testing.T) []string { return []string{"../../examples/final-answer.yaml"} }},
		"plugin-pair": {0, func(t *testing.T) []string {
			specPath, _, _ := pinnedExample(t)
			return []string{specPath}
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			argv := append([]string{"run", "--json", "--no-store", "--workspace", t.TempDir()}, c.args(t)...)
			r := spiceOrch(t, env(t), argv...)
			require.Equal(t, c.code, r.code, r.stderr)
			pairtest.Golden(t, filepath.Join("testdata", "golden", name+".jsonl"), []byte(r.stdout), pairdiff.Options{})
		})
	}
}
