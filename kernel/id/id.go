package id

import (
	"strconv"
	"sync"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// Identifier types. The zero value is "no ID".
type (
	Run         string
	Turn        string
	Operation   string // a model operation or a tool operation
	Call        string // a tool call, named by the model's provider
	Interaction string
)

// Kind names what a Source is asked to allocate.
type Kind uint8

const (
	KindRun Kind = iota + 1
	KindTurn
	KindOperation
	KindInteraction
	numKinds
)

var kindPrefix = [numKinds]string{"", "run", "turn", "op", "ix"}

func (k Kind) String() string {
	if k == 0 || k >= numKinds {
		return "kind(" + strconv.Itoa(int(k)) + ")"
	}
	return kindPrefix[k]
}

// Source allocates identifiers. It is injected into the engine; it must be
// safe for concurrent use and must never return the same identifier twice
// for the same kind. The engine validates what it returns.
type Source interface {
	New(Kind) string
}

// Counter is a deterministic Source: "run-1", "turn-1", "op-1", ... with one
// counter per kind. Optional Prefix is prepended, so two counters can share a
// store without colliding ("a/run-1").
type Counter struct {
	Prefix string

	mu sync.Mutex
	n  [numKinds]uint64
}

// New returns the next identifier of kind k.
func (c *Counter) New(k Kind) string {
	if k == 0 || k >= numKinds {
		k = KindOperation
	}
	c.mu.Lock()
	c.n[k]++
	n := c.n[k]
	c.mu.Unlock()
	b := make([]byte, 0, len(c.Prefix)+len(kindPrefix[k])+21)
	b = append(b, c.Prefix...)
	b = append(b, kindPrefix[k]...)
	b = append(b, '-')
	b = strconv.AppendUint(b, n, 10)
	return string(b)
}

// Check validates s as an identifier for field: 1..bound.MaxIDBytes bytes of
// ASCII letters, digits, '.', '_', ':', '/' or '-'.
func Check(field, s string) error {
	if s == "" {
		return bound.Missing(field)
	}
	if err := bound.Bytes(field, len(s), bound.MaxIDBytes); err != nil {
		return err
	}
	for i := 0; i < len(s); i++ {
		if !idByte[s[i]] {
			return bound.Malformedf(field, "identifiers use only ASCII letters, digits and . _ : / -")
		}
	}
	return nil
}

// idByte[c] reports whether c may appear in an identifier: one load per
// byte on a path every run, turn and operation takes.
var idByte = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '/' || c == '-'
	}
	return t
}()

// Parse validates s and returns it as an identifier of type T.
func Parse[T ~string](field, s string) (T, error) {
	if err := Check(field, s); err != nil {
		return "", err
	}
	return T(s), nil
}
