//go:build unix

package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// misbehaviour is one way to break the protocol, as each fixture switches
// it on, and the cases that must then fail.
type misbehaviour struct {
	python string // a SPICE_FIXTURE_MISBEHAVE switch of the Python fixture
	goMode string // the SPICE_FIXTURE_MODE of the Go fixture that breaks the same rule
	fail   []string
	err    error // what the first failure matches, if anything
}

// misbehaviours is the one table both fixtures are judged by, so that a
// row cannot be added for one and forgotten for the other. Every row has a
// Go mode: the serving code enforces the token and the protocol offer by
// construction, so no_auth and any_protocol are its (internal) Faults;
// the rest are the Go fixture's own doing (plugins/fixtures/goplugin).
var misbehaviours = []misbehaviour{
	{"no-auth", "no_auth", []string{"auth/missing", "auth/wrong"}, nil},
	{"bad-proof", "bad_proof", []string{"handshake/proof"}, ErrProof},
	{"stdout-noise", "stdout_noise", []string{"handshake/proof"}, ErrHandshake},
	{"any-protocol", "any_protocol", []string{"protocol/old", "protocol/new", "protocol/describe"}, ErrProtocol},
	{"bad-manifest", "bad_manifest", []string{"manifest"}, nil},
	{"double-outcome", "two_outcomes", []string{"echo"}, nil},
	{"wrong-call-id", "wrong_call_id", []string{"echo"}, nil},
	{"ignore-cancel", "ignore_cancel", []string{"cancel"}, nil},
	// A Go tool cannot drop the SDK's deadline and keep hearing the
	// cancel: ignore_deadline works on past timeout_millis.
	{"ignore-deadline", "ignore_deadline", []string{"deadline"}, nil},
	{"strict-unknown", "strict_unknown", []string{"unknown-fields"}, nil},
	{"no-size-limit", "no_size_limit", []string{"oversized"}, nil},
	// The Go fixture stops serving but does not exit.
	{"ignore-shutdown", "ignore_shutdown", []string{"shutdown/stdin-eof", "shutdown/rpc"}, nil},
	{"grandchild", "grandchild", []string{"shutdown/stdin-eof", "shutdown/rpc"}, nil},
}

// requireEachCaught runs, for every misbehaviour, the cases it must fail
// against the fixture that launch returns with the switch sw picks on: a
// suite that passes everything would pass here too.
func requireEachCaught(t *testing.T, sw func(misbehaviour) string, launch func(t *testing.T, sw string) ProcessLauncher) {
	t.Helper()
	for _, tc := range misbehaviours {
		t.Run(sw(tc), func(t *testing.T) {
			l := launch(t, sw(tc))
			l.StopGrace = 500 * time.Millisecond
			rs := runSuiteWith(t, Config{Launcher: l, Only: tc.fail, ExitBound: time.Second, CancelBound: time.Second})
			require.Len(t, rs, len(tc.fail))
			for _, r := range rs {
				require.Falsef(t, r.Passed, "%s passed against a fixture with %s", r.Case, sw(tc))
				require.NotEmpty(t, r.Detail)
			}
			if tc.err != nil {
				require.Truef(t, errors.Is(rs[0].Err, tc.err), "%s: %v", rs[0].Case, rs[0].Err)
			}
			require.False(t, Passed(rs))
		})
	}
}

// TestP8_TheSuiteCatchesEachMisbehaviour runs the cases a misbehaving
// fixture must fail against the Python fixture with that misbehaviour on.
func TestP8_TheSuiteCatchesEachMisbehaviour(t *testing.T) {
	requireEachCaught(t, func(m misbehaviour) string { return m.python }, func(t *testing.T, sw string) ProcessLauncher {
		return pythonFixture(t, "SPICE_FIXTURE_MISBEHAVE="+sw)
	})
}

// TestP8_TheSuiteCatchesEachMisbehaviourOfTheGoFixture runs the same rows
// against the Go fixture (the Go SDK's serving code) in the mode that
// breaks the same rule.
func TestP8_TheSuiteCatchesEachMisbehaviourOfTheGoFixture(t *testing.T) {
	requireEachCaught(t, func(m misbehaviour) string { return m.goMode }, func(t *testing.T, sw string) ProcessLauncher {
		return goLauncher(t, "SPICE_FIXTURE_MODE="+sw)
	})
}
