package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sample = `goos: linux
BenchmarkStoreObserver/logs=1-2   2054  583293 ns/op  1714 events/s  786 B/op  18 allocs/op
BenchmarkStoreObserver/logs=8-2   4033  259931 ns/op  3847 events/s  665 B/op  15 allocs/op
BenchmarkStoreObserver/logs=8-2   4033  259931 ns/op  3849 events/s  665 B/op  15 allocs/op
BenchmarkStoreObserver/logs=64-2 10000  144561 ns/op  6917 events/s  705 B/op  13 allocs/op
BenchmarkOpenAIStreamRaw/chunks=10-2  2218  608574 ns/op  67.82 allocs/chunk  46813 ns/chunk
BenchmarkFsync-2  2475  756650 ns/op  1322 syncs/s
PASS
`

func TestParseTakesTheFamiliesAndTheirMetric(t *testing.T) {
	all, err := parse(strings.NewReader(sample))
	require.NoError(t, err)
	require.Len(t, all, 1, "Raw and benchmarks without key=N are not families")
	s := all[0]
	require.Equal(t, "logs", s.key)
	require.Equal(t, map[float64][]float64{1: {1714}, 8: {3847, 3849}, 64: {6917}}, s.points)
	require.Equal(t, 3848.0, median(s.points[8]))
}

func TestRunWritesAPNG(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s.png")
	require.NoError(t, run(strings.NewReader(sample), out))
	require.Error(t, run(strings.NewReader("PASS\n"), out), "nothing to plot")
}

// FuzzParse: whatever the input (at most 64 KiB), parse returns without
// panicking, and draw draws what it returns.
func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte("BenchmarkScalingRunTurns/turns=Inf-2 1 1 ns/op NaN ns/turn\nBenchmarkScalingRunTurns/turns=1e300 1 1 ns/op 5 ns/turn\nBenchmarkScalingRunTurns/turns=3 1 1 ns/op 1e308 ns/turn\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 64<<10 {
			t.Skip()
		}
		all, err := parse(bytes.NewReader(in))
		if err != nil || len(all) == 0 {
			return
		}
		_ = draw(all)
	})
}
