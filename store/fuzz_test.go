package store

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// FuzzDecodeRow feeds arbitrary stored rows to the decoder the read side
// uses for every row it returns: it must never panic, must refuse what is
// not a canonical event matching its columns, and anything it accepts
// re-encodes to exactly the stored bytes.
func FuzzDecodeRow(f *testing.F) {
	seeds := []struct {
		pair bool
		seq  int64
		kind string
		ts   string
		body string
	}{
		{false, 1, "run.started", "2026-01-01T00:00:00.000000000Z",
			`{"seq":1,"kind":"run.started","time":"2026-01-01T00:00:00.000000000Z","payload":{"run_id":"run-1","plan_id":"plan-1","plan_fingerprint":"ab"}}`},
		{true, 2, "tool.started", "2026-01-01T00:00:00.001000000Z",
			`{"seq":2,"kind":"tool.started","time":"2026-01-01T00:00:00.001000000Z","payload":{"worker":"writer","run_id":"run-1","run_seq":5,"payload":{"turn_id":"turn-1","operation_id":"op-1","call_id":"c1","name":"write","effect":"mutating"}}}`},
		{true, 3, "pair.failed", "2026-01-01T00:00:00.002000000Z",
			`{"seq":3,"kind":"pair.failed","time":"2026-01-01T00:00:00.002000000Z","payload":{"reason":{"code":"x","message":"y"}}}`},
		{true, 1, "pair.started", "2026-01-01T00:00:00.000000000Z",
			`{"seq":1,"kind":"pair.started","time":"2026-01-01T00:00:00.000000000Z","payload":{"workers":[{"name":"a"},"b",null]}}`},
		{false, 1, "x", "", `{}`},
	}
	for _, s := range seeds {
		f.Add(s.pair, s.seq, s.kind, s.ts, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, pair bool, seq int64, kind, ts string, body []byte) {
		if len(body) > 1<<16 {
			t.Skip()
		}
		typ := logRun
		if pair {
			typ = logPair
		}
		en, err := decodeRow(typ, "log-1", seq, kind, ts, body)
		if err != nil {
			if _, ok := err.(*IntegrityError); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if got := en.Event.AppendJSON(nil); !bytes.Equal(got, body) {
			t.Fatalf("accepted row re-encodes differently")
		}
		if en.Event.Seq() != uint64(seq) || en.Event.Kind() != kind || timeText(en.Event.Time()) != ts {
			t.Fatalf("accepted row whose columns disagree")
		}
		if en.Payload != nil && en.Payload.Kind() != kind {
			t.Fatalf("typed payload of another kind")
		}
		_ = en.Summary()
	})
}

// FuzzPairFields feeds arbitrary pair timeline payloads to the lenient
// reader the writer and the timeline use: it never panics, and a relay it
// accepts names a valid run and carries an object payload or none.
func FuzzPairFields(f *testing.F) {
	for _, s := range []string{
		`{"pair_id":"p","plan_id":"plan-1","workers":["a","b"]}`,
		`{"worker":"a","run_id":"run-1","run_seq":3,"payload":{"x":1}}`,
		`{"reason":{"code":"c","message":"m"}}`,
		`{"workers":[{"role":"r"},{"worker":"w"},1,[]]}`,
		`{"workers":{"first":"a","second":"b","x":{}},"reason":"worker_failed","limit":"tokens","worker":"a","problem":{"code":"c"}}`,
		`{"run_seq":-1,"run_id":"../x","payload":"s"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > eventlog.MaxEventBytes {
			t.Skip()
		}
		fields, ok := readPairFields(b)
		if !ok {
			return
		}
		_ = workerNames(fields.Workers)
		_ = fields.reasonText()
		if r, ok := fields.relayOf(); ok {
			if r.RunID == "" {
				t.Fatalf("relay without a run ID")
			}
			if r.Payload != nil && r.Payload[0] != '{' {
				t.Fatalf("relay payload is not an object")
			}
		}
	})
}

// A run event rebuilt from a relayed pair row either fails the check every
// read makes (decodeRow) or decodes to an event that encodes to exactly
// the rebuilt bytes, with the row's kind, time and the relayed sequence.
func FuzzRunEventOf(f *testing.F) {
	f.Add("run-1", "tool.started", "2026-01-01T00:00:00.001000000Z",
		[]byte(`{"seq":2,"kind":"tool.started","time":"2026-01-01T00:00:00.001000000Z","payload":{"worker":"writer","run_id":"run-1","run_seq":5,"payload":{"turn_id":"turn-1","operation_id":"op-1","call_id":"c1","name":"write","effect":"mutating"}}}`))
	f.Add("run-1", "model.text_delta", "2026-01-01T00:00:00.001000000Z",
		[]byte(`{"seq":9,"kind":"model.text_delta","time":"2026-01-01T00:00:00.001000000Z","payload":{"worker":"w","run_id":"run-1","run_seq":1,"payload":{}}}`))
	f.Add("run-2", "run.started", "x", []byte(`{"payload":{"run_id":"run-2","run_seq":18446744073709551615,"payload":{"a":"\u2028"}}}`))
	f.Fuzz(func(t *testing.T, run, kind, ts string, body []byte) {
		if len(body) > 1<<16 {
			t.Skip()
		}
		seq, b, ok := runEventOf(run, kind, ts, body)
		if !ok {
			return
		}
		if seq == 0 || seq > math.MaxInt64 {
			t.Fatalf("rebuilt sequence %d", seq)
		}
		en, err := decodeRow(logRun, run, int64(seq), kind, ts, b)
		if err != nil {
			var ie *IntegrityError
			if !errors.As(err, &ie) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if got := en.Event.AppendJSON(nil); !bytes.Equal(got, b) {
			t.Fatalf("rebuilt %q encodes as %q", b, got)
		}
		if en.Event.Seq() != seq || en.Event.Kind() != kind || timeText(en.Event.Time()) != ts {
			t.Fatalf("rebuilt event %d %q %s from %d %q %s", en.Event.Seq(), en.Event.Kind(), timeText(en.Event.Time()), seq, kind, ts)
		}
	})
}
