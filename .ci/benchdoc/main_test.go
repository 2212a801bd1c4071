package main

import (
	"strings"
	"testing"
	"time"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/spice-orch/spice-orch/kernel/engine
cpu: Some CPU
BenchmarkEngineTextRun-2   	  200000	      5000 ns/op	    1790 B/op	      18 allocs/op
BenchmarkEngineTextRun-2   	  200000	      7000 ns/op	    1790 B/op	      18 allocs/op
BenchmarkEngineTextRun-2   	  200000	      6000 ns/op	    1792 B/op	      18 allocs/op
    bench_test.go:1: a log line
pkg: github.com/spice-orch/spice-orch/scheduler
BenchmarkSchedulerThroughput-2 	 10000	 70000 ns/op	 14000 pairs/s	 9000 B/op	 254 allocs/op
pkg: github.com/spice-orch/spice-orch/jetstream
BenchmarkTimelineDeltas/pairs=100/linger=20ms-2 	 1	 2095163553 ns/op	 0.9520 msgs/event	 2856 msgs/s	 20.87 p50-ms	 143.0 p99-ms	 25165256 B/op	 341792 allocs/op
PASS
`

func TestRenderTakesMediansPerBenchmark(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	doc := render(res, time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC))
	for _, want := range []string{
		"| `BenchmarkEngineTextRun` | kernel/engine | 3 | 6.00 µs | 1790 | 18 | — |",
		"| `BenchmarkSchedulerThroughput` | scheduler | 1 | 70.00 µs | 9000 | 254 | 14000 pairs/s |",
		"| `BenchmarkTimelineDeltas/pairs=100/linger=20ms` | jetstream | 1 | 2095.16 ms | 25165256 | 341792 | 0.952 msgs/event, 2856 msgs/s, 20.9 p50-ms, 143 p99-ms |",
		"Last run: 2026-12-01 20:00 UTC on Some CPU (linux/amd64)",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("missing %q in:\n%s", want, doc)
		}
	}
}
