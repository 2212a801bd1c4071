package telemetry

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// idKey carries, in the context a span is started with, the name its IDs
// derive from.
type idKey struct{}

// withSpanKey returns ctx naming the next span key for IDGenerator.
func withSpanKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idKey{}, key)
}

// IDGenerator returns the ID generator that makes a pair's trace the same
// every time it is drawn: a span started by this package gets IDs derived
// from its key (the pair ID for the pair span, the worker and run ID for a
// run, and so on), and any other span random ones. Give it to
// sdktrace.WithIDGenerator; Setup does.
//
// The trace ID of a pair that is not continuing another trace is a
// function of the pair ID alone: pair IDs must be unique for traces to be.
func IDGenerator() sdktrace.IDGenerator { return idGenerator{} }

type idGenerator struct{}

// NewIDs derives both IDs of a root span from its key.
func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	key, ok := ctx.Value(idKey{}).(string)
	if !ok {
		var tid trace.TraceID
		randomID(tid[:])
		return tid, randomSpanID()
	}
	var tid trace.TraceID
	sum := derive("trace", nil, key)
	copy(tid[:], sum[:])
	if !tid.IsValid() {
		tid[0] = 1
	}
	return tid, deriveSpanID(tid, key)
}

// NewSpanID derives a span ID from the trace and the span's key.
func (idGenerator) NewSpanID(ctx context.Context, tid trace.TraceID) trace.SpanID {
	key, ok := ctx.Value(idKey{}).(string)
	if !ok {
		return randomSpanID()
	}
	return deriveSpanID(tid, key)
}

func deriveSpanID(tid trace.TraceID, key string) trace.SpanID {
	var sid trace.SpanID
	sum := derive("span", tid[:], key)
	copy(sid[:], sum[:])
	if !sid.IsValid() {
		sid[0] = 1
	}
	return sid
}

// derive is a length-prefixed, domain-separated SHA-256, so that no two
// (domain, trace, key) triples hash alike by concatenation.
func derive(domain string, tid []byte, key string) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, part := range [][]byte{[]byte("spice-orch/telemetry/" + domain), tid, []byte(key)} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	randomID(sid[:])
	return sid
}

// randomID fills b with random bytes, never all zero.
func randomID(b []byte) {
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	for _, c := range b {
		if c != 0 {
			return
		}
	}
	b[0] = 1
}
