package event

import (
	"bytes"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// readerFor returns the payload reader for kind, or nil.
func readerFor(kind string) func(*reader) Payload {
	switch kind {
	case KindRunStarted:
		return readRunStarted
	case KindRunCompleted:
		return readRunCompleted
	case KindRunFailed:
		return readRunFailed
	case KindRunCancelled:
		return readRunCancelled
	case KindTurnStarted:
		return readTurnStarted
	case KindTurnCompleted:
		return readTurnCompleted
	case KindTurnFailed:
		return readTurnFailed
	case KindTurnCancelled:
		return readTurnCancelled
	case KindModelStarted:
		return readModelStarted
	case KindModelTextDelta:
		return readModelTextDelta
	case KindModelCompleted:
		return readModelCompleted
	case KindModelFailed:
		return readModelFailed
	case KindModelCancelled:
		return readModelCancelled
	case KindToolStarted:
		return readToolStarted
	case KindToolProgress:
		return readToolProgress
	case KindToolCompleted:
		return readToolCompleted
	case KindToolFailed:
		return readToolFailed
	case KindToolCancelled:
		return readToolCancelled
	case KindInteractionStarted:
		return readInteractionStarted
	case KindInteractionAnswered:
		return readInteractionAnswered
	case KindInteractionFailed:
		return readInteractionFailed
	case KindInteractionCancelled:
		return readInteractionCancelled
	}
	return nil
}

// DecodePayload reads the payload of an event of the given kind from its
// canonical JSON (a store's row, a client's frame). It is strict: the kind
// must be a run event kind, the bytes at most eventlog.MaxEventBytes and
// exactly canonical (the payload re-encodes to the same bytes), and every
// field within its bounds. Errors are *bound.Error values that never quote
// the input.
func DecodePayload(kind string, raw []byte) (Payload, error) {
	read := readerFor(kind)
	if read == nil {
		return nil, bound.Malformedf("event.kind", "not a run event kind")
	}
	if err := bound.Bytes("payload", len(raw), eventlog.MaxEventBytes); err != nil {
		return nil, err
	}
	d := reader{r: eventlog.ReadObject("payload", raw)}
	p := read(&d)
	if err := d.close(); err != nil {
		return nil, err
	}
	if p.EncodedLen() != len(raw) || !bytes.Equal(p.AppendJSON(make([]byte, 0, len(raw))), raw) {
		return nil, bound.Malformedf("payload", "not in canonical form")
	}
	return p, nil
}

// Decode reads one encoded run event: the envelope with eventlog.Decode and
// the payload with DecodePayload. The returned Event carries the payload as
// raw bytes; the typed payload is returned beside it.
func Decode(b []byte) (eventlog.Event, Payload, error) {
	e, err := eventlog.Decode(b)
	if err != nil {
		return eventlog.Event{}, nil, err
	}
	raw, _ := e.Payload().(eventlog.Raw)
	p, err := DecodePayload(e.Kind(), raw.Bytes())
	if err != nil {
		return eventlog.Event{}, nil, err
	}
	return e, p, nil
}
