package telemetry_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/spice-orch/spice-orch/telemetry"
)

// FuzzReplayJSON feeds ReplayJSON arbitrary bytes after a valid timeline
// prefix: it never panics, returns nil or an ErrMalformed error, and
// leaves no pair open.
func FuzzReplayJSON(f *testing.F) {
	// A recorded timeline (a relay whose tool call fails), read from a
	// file: a fuzz worker then starts without playing a pair.
	b, err := os.ReadFile("testdata/failed-tool.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	f.Add([]byte(strings.Join(lines, "")))
	f.Add([]byte(strings.Join(lines[:5], "")))
	f.Add([]byte(lines[0] + `{"seq":2}` + "\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		// No tracer: the reading and the drawing's bookkeeping are what
		// outside bytes reach; spans only record what they are given.
		tel, err := telemetry.New(telemetry.Config{})
		if err != nil {
			t.Fatal(err)
		}
		err = tel.ReplayJSON(context.Background(), strings.NewReader(string(b)))
		if err != nil && !errors.Is(err, telemetry.ErrMalformed) {
			t.Fatalf("not a typed error: %v", err)
		}
		if n := tel.Stats().Open; n != 0 {
			t.Fatalf("%d pairs left open", n)
		}
	})
}
