package plan_test

import (
	"encoding/hex"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/plan"
)

// Fingerprint.String keeps the last fingerprint it encoded: alternating
// and concurrent fingerprints must each still get their own hex form.
func TestFingerprintStringAlternatingAndConcurrent(t *testing.T) {
	var a, b plan.Fingerprint
	for i := range a {
		a[i], b[i] = byte(i), byte(255-i)
	}
	want := map[plan.Fingerprint]string{a: hex.EncodeToString(a[:]), b: hex.EncodeToString(b[:])}
	for range 3 {
		require.Equal(t, want[a], a.String())
		require.Equal(t, want[b], b.String())
	}
	var wg sync.WaitGroup
	for g := range 4 {
		f := a
		if g%2 == 1 {
			f = b
		}
		wg.Go(func() {
			for range 1000 {
				if got := f.String(); got != want[f] {
					t.Errorf("String() = %s, want %s", got, want[f])
					return
				}
			}
		})
	}
	wg.Wait()
}
