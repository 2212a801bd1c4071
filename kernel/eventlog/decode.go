package eventlog

import (
	"bytes"
	"time"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// Decode reads one event from its canonical encoding, as written by
// Event.AppendJSON: a store's row, a network client's frame. It is strict:
// the envelope must be byte-for-byte canonical (fields in order, no
// whitespace, no unknown fields, nothing after it), the sequence at least 1,
// the kind a bound.Name, and the input at most MaxEventBytes. The payload
// comes back as a Raw holding a copy of its bytes; kernel/event (or whoever
// owns the kind) decodes it into a typed value.
//
// Every accepted input re-encodes to the same bytes. Errors are
// *bound.Error values that never quote the input.
func Decode(b []byte) (Event, error) {
	if err := bound.Bytes("event", len(b), MaxEventBytes); err != nil {
		return Event{}, err
	}
	rest, ok := bytes.CutPrefix(b, []byte(prefixSeq))
	if !ok {
		return Event{}, bound.Malformedf("event", "not a canonical event envelope")
	}
	seq, n, ok := parseUint(rest)
	if !ok || seq == 0 {
		return Event{}, bound.Malformedf("event.seq", "must be a canonical integer of at least 1")
	}
	if rest, ok = bytes.CutPrefix(rest[n:], []byte(prefixKind)); !ok {
		return Event{}, bound.Malformedf("event.kind", "missing or misplaced")
	}
	kind, n := nameString(rest)
	if err := bound.Name("event.kind", kind); n == 0 || err != nil {
		if err == nil {
			err = bound.Malformedf("event.kind", "must be a quoted name")
		}
		return Event{}, err
	}
	if rest, ok = bytes.CutPrefix(rest[n:], []byte(prefixTime)); !ok || len(rest) < timeLen {
		return Event{}, bound.Malformedf("event.time", "missing or misplaced")
	}
	t, err := parseTime(rest[:timeLen])
	if err != nil {
		return Event{}, err
	}
	if rest, ok = bytes.CutPrefix(rest[timeLen:], []byte(prefixPayload)); !ok {
		return Event{}, bound.Malformedf("event.payload", "missing or misplaced")
	}
	body, ok := bytes.CutSuffix(rest, []byte("}"))
	if !ok {
		return Event{}, bound.Malformedf("event", "missing closing brace")
	}
	raw, err := NewRaw(body)
	if err != nil {
		return Event{}, err
	}
	return Event{seq: seq, kind: kind, time: t, payload: raw, size: len(b)}, nil
}

// nameString reads a quoted string without escapes, as every bound.Name is
// encoded, and returns it with the bytes consumed (0 if there is none).
func nameString(b []byte) (string, int) {
	if len(b) < 2 || b[0] != '"' {
		return "", 0
	}
	end := bytes.IndexByte(b[1:], '"')
	if end < 0 || end > bound.MaxNameBytes {
		return "", 0
	}
	return string(b[1 : 1+end]), end + 2
}

// parseTime reads exactly TimeLayout. Re-encoding and comparing rejects any
// other spelling of the same instant.
func parseTime(b []byte) (time.Time, error) {
	t, err := time.Parse(TimeLayout, string(b))
	if err != nil || !validTime(t) {
		return time.Time{}, bound.Malformedf("event.time", "must be UTC in the form "+TimeLayout)
	}
	var buf [timeLen]byte
	if !bytes.Equal(appendTime(buf[:0], t), b) {
		return time.Time{}, bound.Malformedf("event.time", "must be UTC in the form "+TimeLayout)
	}
	return t, nil
}
