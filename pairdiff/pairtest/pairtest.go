package pairtest

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/pairdiff"
)

var update = flag.Bool("update", false, "rewrite golden timeline files instead of comparing with them")

// TB is the part of testing.TB that Golden uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// Golden compares got, a timeline's JSON lines, with the golden file at
// path. When they differ it fails t with the first divergence; with
// -update it writes got to path (making its directory) and passes.
func Golden(t TB, path string, got []byte, o pairdiff.Options) {
	t.Helper()
	if *update {
		if err := write(path, got); err != nil {
			t.Fatalf("pairtest: %v", err)
		}
		t.Logf("pairtest: wrote %s", path)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("pairtest: %v (run the test with -update to write it)", err)
		return
	}
	if d, err := Compare(want, got, o); err != nil {
		t.Fatalf("pairtest: %s: %v", path, err)
	} else if d != nil {
		t.Fatalf("pairtest: the timeline does not match %s (A is the golden file, B this run; -update rewrites it):\n%s", path, d)
	}
}

// Compare compares two timelines' JSON lines: A is want, B got.
func Compare(want, got []byte, o pairdiff.Options) (*pairdiff.Divergence, error) {
	a, err := pairdiff.Parse("A", bytes.NewReader(want))
	if err != nil {
		return nil, err
	}
	b, err := pairdiff.Parse("B", bytes.NewReader(got))
	if err != nil {
		return nil, err
	}
	return pairdiff.Compare(a, b, o), nil
}

// Subscriber is what has a timeline to read: an orchestrator.Pair, an
// engine.Run.
type Subscriber interface {
	Subscribe(ctx context.Context, afterSeq uint64) (*eventlog.Subscription, error)
}

// Lines reads the whole timeline of a finished pair or run as JSON lines,
// as `spice-orch run --json` prints them.
func Lines(ctx context.Context, s Subscriber) ([]byte, error) {
	sub, err := s.Subscribe(ctx, 0)
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	var out []byte
	for {
		e, err := sub.Next(ctx)
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = e.AppendJSON(out)
		out = append(out, '\n')
	}
}

func write(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
