package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
)

// Key is a tool call's idempotency key: 64 lower-case hex characters of a
// SHA-256. The zero Key means "no key".
type Key string

// Len is the length of every valid Key.
const Len = 2 * sha256.Size

// domain separates these digests from every other SHA-256 the project
// computes; bump the version if the layout changes.
const domain = "spice-orch/idempotency.Key/v1"

// Derive returns the key of call callID of run runID of pair pairID: the
// SHA-256 of the domain and the three IDs, each length-prefixed, so no two
// different triples share a key. The same IDs give the same key in any
// process, which is what keeps it stable across a resume.
func Derive(pairID string, runID id.Run, callID id.Call) Key {
	h := sha256.New()
	var n [8]byte
	for _, s := range [...]string{domain, pairID, string(runID), string(callID)} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var sum [sha256.Size]byte
	return Key(hex.EncodeToString(h.Sum(sum[:0])))
}

// Parse validates s as a Key: exactly Len lower-case hex characters. What
// arrives from outside (a plugin request's metadata) goes through it.
func Parse(s string) (Key, error) {
	if len(s) != Len {
		return "", bound.Malformedf("idempotency_key", "must be 64 lower-case hex characters")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", bound.Malformedf("idempotency_key", "must be 64 lower-case hex characters")
		}
	}
	return Key(s), nil
}

// IsZero reports whether k is the zero Key.
func (k Key) IsZero() bool { return k == "" }

// String returns the key's hex.
func (k Key) String() string { return string(k) }

type ctxKey struct{}

// WithKey returns ctx carrying k. A zero k returns ctx unchanged.
func WithKey(ctx context.Context, k Key) context.Context {
	if k.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, k)
}

// FromContext returns the key ctx carries, if any.
func FromContext(ctx context.Context) (Key, bool) {
	k, ok := ctx.Value(ctxKey{}).(Key)
	return k, ok && !k.IsZero()
}
