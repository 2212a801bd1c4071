//go:build unix

package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestP8_TheSuiteCatchesEachMisbehaviour runs the cases a misbehaving
// fixture must fail against the Python fixture with that misbehaviour on:
// a suite that passes everything would pass here too.
func TestP8_TheSuiteCatchesEachMisbehaviour(t *testing.T) {
	for _, tc := range []struct {
		misbehave string
		fail      []string
		err       error // what the first failure matches, if anything
	}{
		{"no-auth", []string{"auth/missing", "auth/wrong"}, nil},
		{"bad-proof", []string{"handshake/proof"}, ErrProof},
		{"stdout-noise", []string{"handshake/proof"}, ErrHandshake},
		{"any-protocol", []string{"protocol/old", "protocol/new", "protocol/describe"}, ErrProtocol},
		{"bad-manifest", []string{"manifest"}, nil},
		{"double-outcome", []string{"echo"}, nil},
		{"wrong-call-id", []string{"echo"}, nil},
		{"ignore-cancel", []string{"cancel"}, nil},
		{"ignore-deadline", []string{"deadline"}, nil},
		{"strict-unknown", []string{"unknown-fields"}, nil},
		{"no-size-limit", []string{"oversized"}, nil},
		{"ignore-shutdown", []string{"shutdown/stdin-eof", "shutdown/rpc"}, nil},
		{"grandchild", []string{"shutdown/stdin-eof", "shutdown/rpc"}, nil},
	} {
		t.Run(tc.misbehave, func(t *testing.T) {
			l := pythonFixture(t, "SPICE_FIXTURE_MISBEHAVE="+tc.misbehave)
			l.StopGrace = 500 * time.Millisecond
			rs := runSuiteWith(t, Config{Launcher: l, Only: tc.fail, ExitBound: time.Second, CancelBound: time.Second})
			require.Len(t, rs, len(tc.fail))
			for _, r := range rs {
				require.Falsef(t, r.Passed, "%s passed against a fixture with %s", r.Case, tc.misbehave)
				require.NotEmpty(t, r.Detail)
			}
			if tc.err != nil {
				require.Truef(t, errors.Is(rs[0].Err, tc.err), "%s: %v", rs[0].Case, rs[0].Err)
			}
			require.False(t, Passed(rs))
		})
	}
}
