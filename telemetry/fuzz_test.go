package telemetry_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spice-orch/spice-orch/telemetry"
)

// FuzzReplayJSON feeds ReplayJSON arbitrary bytes after a valid timeline
// prefix: it never panics, returns nil or an ErrMalformed error, and
// leaves no pair open.
func FuzzReplayJSON(f *testing.F) {
	p, _, err := play(f, context.Background(), builtinPair(f, nil))
	if err != nil {
		f.Fatal(err)
	}
	lines := strings.SplitAfter(jsonLines(events(f, p)), "\n")
	f.Add([]byte(strings.Join(lines, "")))
	f.Add([]byte(strings.Join(lines[:10], "")))
	f.Add([]byte(lines[0] + `{"seq":2}` + "\n"))
	f.Add([]byte{})
	tr := newTracing(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		tel, err := telemetry.New(telemetry.Config{TracerProvider: tr.tp})
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
		tr.exp.Reset()
	})
}
