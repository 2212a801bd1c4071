package devloop

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkPluginDevLoop is the time from a saved file to an active
// generation of the example plugin (plugins/examples/wordcount): debounce
// (10 ms), build, verification, the conformance protocol cases and
// activation. build-ns/op is the build's share of it.
func BenchmarkPluginDevLoop(b *testing.B) {
	src, err := os.ReadFile("../examples/wordcount/main.go")
	if err != nil {
		b.Fatal(err)
	}
	if !strings.Contains(string(src), `Version: "1.0.0"`) {
		b.Fatal("the example no longer names its version 1.0.0")
	}
	dir := filepath.Join(b.TempDir(), "wordcount")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for n, c := range moduleFiles {
		if err := os.WriteFile(filepath.Join(dir, n), c, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	save(b, dir, "main.go", string(src))
	reports := make(chan Report, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	l, err := New(ctx, Config{Go: goCmd, Dir: dir, Out: filepath.Join(b.TempDir(), "builds"),
		Debounce: 10 * time.Millisecond, OnReport: func(r Report) { reports <- r }})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	wait := func() Report {
		for r := range reports {
			switch r.Kind {
			case Activated:
				return r
			case Failed, Unchanged, Discarded:
				b.Fatalf("%s", r)
			}
		}
		return Report{}
	}
	wait()
	var build, total time.Duration
	b.ResetTimer()
	for i := range b.N {
		v := `Version: "1.0.` + strconv.Itoa(i+1) + `"`
		start := time.Now()
		save(b, dir, "main.go", strings.Replace(string(src), `Version: "1.0.0"`, v, 1))
		r := wait()
		total += time.Since(start)
		build += r.Build
	}
	b.StopTimer()
	b.ReportMetric(float64(build.Nanoseconds())/float64(b.N), "build-ns/op")
	b.ReportMetric(float64(build)/float64(total), "build-share")
}
