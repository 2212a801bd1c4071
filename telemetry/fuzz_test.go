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

// FuzzReadRecord feeds ReadRecord arbitrary bytes: it never panics, and
// returns a record with a valid pair ID or an ErrMalformed error.
func FuzzReadRecord(f *testing.F) {
	f.Add([]byte(`{"seq":1,"kind":"trace.recorded","time":"2026-12-01T10:00:00.000000000Z","payload":{"pair_id":"pair-1","providers":{"writer":"openai"},"parent":{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7","sampled":true}}}` + "\n"))
	f.Add([]byte(`{"seq":1,"kind":"trace.recorded","time":"2026-12-01T10:00:00.000000000Z","payload":{"pair_id":"p","providers":{}}}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := telemetry.ReadRecord(strings.NewReader(string(b)))
		if err != nil {
			if !errors.Is(err, telemetry.ErrMalformed) {
				t.Fatalf("not a typed error: %v", err)
			}
			return
		}
		if r.PairID == "" || len(r.Providers) > 2 {
			t.Fatalf("an invalid record was accepted: %+v", r)
		}
	})
}
