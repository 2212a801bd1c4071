package eventlog

import (
	"time"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// MaxEventBytes bounds one encoded event, envelope included. It leaves room
// for the largest kernel payload with worst-case escaping; a log may be
// configured smaller.
const MaxEventBytes = 2 << 20

// Payload is the typed body of an event. It must be an immutable value: the
// log keeps it and encodes it later, possibly many times and concurrently.
//
// AppendJSON appends one canonical JSON object (fixed field order, no
// whitespace, same value → same bytes). EncodedLen returns exactly
// len(AppendJSON(nil)) without allocating; the log calls it on every Append
// to enforce its byte bound, and calls AppendJSON only when bytes are needed.
type Payload interface {
	AppendJSON(dst []byte) []byte
	EncodedLen() int
}

// Raw is a payload that is already encoded JSON: a payload decoded without
// its kind's types, or one relayed from another log. The zero Raw encodes as
// {}.
type Raw struct{ s string }

// NewRaw copies b after checking that it is exactly one JSON object of at
// most MaxEventBytes. It does not canonicalize: AppendJSON returns b as is.
func NewRaw(b []byte) (Raw, error) {
	if err := bound.Bytes("payload", len(b), MaxEventBytes); err != nil {
		return Raw{}, err
	}
	if !validObject(b) {
		return Raw{}, bound.Malformedf("payload", "not a single JSON object")
	}
	return Raw{s: string(b)}, nil
}

// AppendJSON appends the payload bytes.
func (r Raw) AppendJSON(dst []byte) []byte {
	if r.s == "" {
		return append(dst, "{}"...)
	}
	return append(dst, r.s...)
}

// EncodedLen returns the payload's length in bytes.
func (r Raw) EncodedLen() int {
	if r.s == "" {
		return 2
	}
	return len(r.s)
}

// Bytes returns a copy of the payload bytes.
func (r Raw) Bytes() []byte { return r.AppendJSON(nil) }

// Record is what a caller asks the log to append. The log assigns the
// sequence number.
type Record struct {
	// Kind names the event, e.g. "run.started": a bound.Name.
	Kind string
	// Time is when the event happened, from the caller's clock. It is kept
	// in UTC without a monotonic reading.
	Time time.Time
	// Terminal marks an event that ends a lifecycle. Terminal events may use
	// the capacity the log reserves for them.
	Terminal bool
	// Payload is the typed body; it must not be nil.
	Payload Payload
}

// Event is one committed, immutable entry of a log. Its canonical encoding
// is {"seq":N,"kind":"…","time":"…","payload":{…}}.
type Event struct {
	log     string // the log's name (Config.Name); not part of the encoding
	seq     uint64
	kind    string
	time    time.Time
	payload Payload
	size    int
}

// Envelope lengths: {"seq": ,"kind": ,"time":"…" ,"payload": }.
const (
	prefixSeq     = `{"seq":`
	prefixKind    = `,"kind":`
	prefixTime    = `,"time":"`
	prefixPayload = `","payload":`
	envelopeFixed = len(prefixSeq) + len(prefixKind) + len(prefixTime) + timeLen + len(prefixPayload) + 1
)

// check validates a record and returns the encoded size of its event apart
// from the sequence number's digits.
func (r *Record) check() (int, error) {
	if err := bound.Name("event.kind", r.Kind); err != nil {
		return 0, err
	}
	if !validTime(r.Time) {
		return 0, bound.Malformedf("event.time", "must be set, with a year from 0000 to 9999")
	}
	if r.Payload == nil {
		return 0, bound.Missing("event.payload")
	}
	n := r.Payload.EncodedLen()
	if n < 2 {
		return 0, bound.Malformedf("event.payload", "encoded length below the smallest JSON object")
	}
	if err := bound.Bytes("event.payload", n, MaxEventBytes); err != nil {
		return 0, err
	}
	return envelopeFixed + len(r.Kind) + 2 + n, nil
}

// Seq returns the event's sequence number, starting at 1.
func (e Event) Seq() uint64 { return e.seq }

// Log returns the name of the log that committed the event (Config.Name),
// so that an observer shared by many logs knows where each event belongs.
// It is not part of the event's encoding.
func (e Event) Log() string { return e.log }

// Kind returns the event's kind.
func (e Event) Kind() string { return e.kind }

// Time returns the event's time in UTC.
func (e Event) Time() time.Time { return e.time }

// Payload returns the event's payload. Payloads are immutable values.
func (e Event) Payload() Payload { return e.payload }

// EncodedLen returns len(e.AppendJSON(nil)).
func (e Event) EncodedLen() int { return e.size }

// IsZero reports whether e is the zero Event, which no log returns with a
// nil error.
func (e Event) IsZero() bool { return e.seq == 0 }

// AppendJSON appends the canonical encoding of e.
func (e Event) AppendJSON(dst []byte) []byte {
	dst = append(dst, prefixSeq...)
	dst = AppendUint(dst, e.seq)
	dst = append(dst, prefixKind...)
	dst = AppendString(dst, e.kind)
	dst = append(dst, prefixTime...)
	dst = appendTime(dst, e.time)
	dst = append(dst, prefixPayload...)
	if e.payload == nil {
		dst = append(dst, "{}"...)
	} else {
		dst = e.payload.AppendJSON(dst)
	}
	return append(dst, '}')
}

// MarshalJSON returns the canonical encoding of e.
func (e Event) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(make([]byte, 0, e.size)), nil
}
