package pairtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/pairdiff"
)

// recorder is a TB that records a failure instead of ending the test.
type recorder struct {
	failed bool
	msg    string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}

func (r *recorder) Logf(string, ...any) {}

const (
	golden = `{"seq":1,"kind":"pair.started","time":"2026-12-03T12:00:00Z","payload":{"pair_id":"p-1"}}
{"seq":2,"kind":"tool.completed","time":"2026-12-03T12:00:00Z","payload":{"worker":"writer","run_id":"r-1","run_seq":5,"payload":{"outcome":{"content":"12 words"}}}}
{"seq":3,"kind":"pair.completed","time":"2026-12-03T12:00:00Z","payload":{"pair_id":"p-1","reason":"completed"}}
`
)

func TestO7_GoldenFailsWithTheFirstDivergenceAndUpdateRewrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "testdata", "pair.jsonl")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(golden), 0o644))

	var r recorder
	Golden(&r, path, []byte(strings.ReplaceAll(golden, "p-1", "p-2")), pairdiff.Options{})
	require.False(t, r.failed, "IDs are not compared: %s", r.msg)

	got := []byte(strings.Replace(golden, "12 words", "13 words", 1))
	Golden(&r, path, got, pairdiff.Options{})
	require.True(t, r.failed)
	require.Contains(t, r.msg, "first divergence at event 2")
	require.Contains(t, r.msg, `payload.outcome.content: A "12 words", B "13 words"`)

	*update = true
	t.Cleanup(func() { *update = false })
	r = recorder{}
	Golden(&r, path, got, pairdiff.Options{})
	require.False(t, r.failed, r.msg)
	*update = false
	Golden(&r, path, got, pairdiff.Options{Exact: true})
	require.False(t, r.failed, "after -update it passes: %s", r.msg)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(got), string(b))
}

func TestO7_GoldenFailsOnAMissingOrMalformedFile(t *testing.T) {
	dir := t.TempDir()
	var r recorder
	Golden(&r, filepath.Join(dir, "none.jsonl"), []byte(golden), pairdiff.Options{})
	require.True(t, r.failed)
	require.Contains(t, r.msg, "-update")

	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("not json\n"), 0o644))
	r = recorder{}
	Golden(&r, bad, []byte(golden), pairdiff.Options{})
	require.True(t, r.failed)
	require.Contains(t, r.msg, "A line 1: not a JSON object")
}
