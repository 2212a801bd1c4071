package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
)

// ID names a plan. A Source never activates the same ID twice, so an ID
// recorded in an event or a snapshot always means the same tools.
type ID string

// ParseID validates s (id.Check syntax) and returns it as an ID.
func ParseID(s string) (ID, error) { return id.Parse[ID]("plan.id", s) }

// Fingerprint identifies the complete tool contracts of a plan (K11).
type Fingerprint [sha256.Size]byte

// String returns the lower-case hex form. The digits are written to the
// stack first, so the string is the only allocation.
func (f Fingerprint) String() string {
	var b [2 * sha256.Size]byte
	hex.Encode(b[:], f[:])
	return string(b[:])
}

// IsZero reports whether f is the zero Fingerprint, which no plan has.
func (f Fingerprint) IsZero() bool { return f == Fingerprint{} }

// MarshalText returns the lower-case hex form.
func (f Fingerprint) MarshalText() ([]byte, error) {
	b := make([]byte, hex.EncodedLen(len(f)))
	hex.Encode(b, f[:])
	return b, nil
}

// UnmarshalText parses the form MarshalText produces.
func (f *Fingerprint) UnmarshalText(b []byte) error {
	g, err := parseFingerprint(b)
	if err != nil {
		return err
	}
	*f = g
	return nil
}

// ParseFingerprint parses exactly 64 lower-case hex digits. Upper case is
// rejected so that a fingerprint has one text form.
func ParseFingerprint(s string) (Fingerprint, error) { return parseFingerprint([]byte(s)) }

const fingerprintField = "plan.fingerprint"

func parseFingerprint(b []byte) (Fingerprint, error) {
	var f Fingerprint
	if len(b) == 0 {
		return f, bound.Missing(fingerprintField)
	}
	if len(b) != hex.EncodedLen(len(f)) {
		return f, bound.Malformedf(fingerprintField, "must be 64 hex digits")
	}
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return f, bound.Malformedf(fingerprintField, "must be lower-case hex")
		}
	}
	if _, err := hex.Decode(f[:], b); err != nil {
		return Fingerprint{}, bound.Malformedf(fingerprintField, "must be lower-case hex")
	}
	return f, nil
}

// Identity is what a snapshot or an event records about the plan a run used.
type Identity struct {
	ID          ID
	Fingerprint Fingerprint
}

// Check validates both fields.
func (i Identity) Check() error {
	if err := id.Check("plan.id", string(i.ID)); err != nil {
		return err
	}
	if i.Fingerprint.IsZero() {
		return bound.Missing(fingerprintField)
	}
	return nil
}

// String returns "id@fingerprint".
func (i Identity) String() string { return string(i.ID) + "@" + i.Fingerprint.String() }

// ErrMismatch matches every *MismatchError with errors.Is.
var ErrMismatch = errors.New("plan identity mismatch")

// MismatchError says that a plan is not the one a caller expected, for
// example when a snapshot names a plan ID whose tools have since changed.
type MismatchError struct {
	Want Identity
	Got  Identity
}

func (e *MismatchError) Error() string {
	what := "fingerprint"
	if e.Want.ID != e.Got.ID {
		what = "ID"
	}
	return "plan " + what + " mismatch: want " + e.Want.String() + ", got " + e.Got.String()
}

// Is reports ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }
