package plan_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/plan"
)

// Plan IDs and fingerprints arrive from snapshots and clients.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{"plan-1", "", "a/b:c.d_e", "plan 1", strings.Repeat("p", 129), "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := plan.ParseID(s)
		if err != nil {
			if !errors.Is(err, bound.ErrInvalid) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if string(got) != s || len(s) == 0 || len(s) > bound.MaxIDBytes {
			t.Fatalf("accepted %q", s)
		}
	})
}

func FuzzParseFingerprint(f *testing.F) {
	for _, s := range []string{"", strings.Repeat("0", 64), strings.Repeat("A", 64), strings.Repeat("af", 32), "zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fp, err := plan.ParseFingerprint(s)
		if err != nil {
			if !errors.Is(err, bound.ErrInvalid) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if fp.String() != s {
			t.Fatalf("round trip %q -> %q", s, fp.String())
		}
		var back plan.Fingerprint
		text, _ := fp.MarshalText()
		if err := back.UnmarshalText(text); err != nil || back != fp {
			t.Fatalf("text round trip failed")
		}
	})
}
