//go:build unix

package conformance

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
	// A read-only tool whose call ends uncertain.
	{"read-only-uncertain", "read_only_uncertain", []string{"error/definitive"}, nil},
	// More progress messages in one call than the protocol's bound.
	{"progress-flood", "progress_flood", []string{"progress/bound"}, nil},
	// A descendant that called setsid: out of the group, holding the pipes.
	{"setsid-grandchild", "setsid_grandchild", []string{"shutdown/stdin-eof", "shutdown/rpc"}, nil},
}

// requireEachCaught runs, for every misbehaviour, the cases it must fail
// against the fixture that launch returns with the switch sw picks on: a
// suite that passes everything would pass here too, and so would one that
// only failed to start the fixture.
func requireEachCaught(t *testing.T, sw func(misbehaviour) string, launch func(t *testing.T, sw string) ProcessLauncher) {
	t.Helper()
	for _, tc := range misbehaviours {
		t.Run(sw(tc), func(t *testing.T) {
			l := launch(t, sw(tc))
			l.StopGrace = 500 * time.Millisecond
			rs := runSuiteWith(t, Config{Launcher: l, Only: tc.fail, ExitBound: time.Second, CancelBound: time.Second})
			require.NoError(t, caught(tc, rs), "against a fixture with %s", sw(tc))
		})
	}
}

// caught says why the results rs of tc's cases do not show the suite
// catching tc, or nil when they do: every case failed, saying why, with
// the row's error if it has one, and otherwise not for want of a started
// plugin. A fixture that dies or hangs before its handshake fails every
// case; that failure is not the misbehaviour.
func caught(tc misbehaviour, rs []Result) error {
	if len(rs) != len(tc.fail) {
		return fmt.Errorf("%d results for %d cases", len(rs), len(tc.fail))
	}
	for i, r := range rs {
		switch {
		case r.Passed:
			return fmt.Errorf("%s passed", r.Case)
		case r.Detail == "":
			return fmt.Errorf("%s failed without a detail", r.Case)
		case i == 0 && tc.err != nil && !errors.Is(r.Err, tc.err):
			return fmt.Errorf("%s: %v, want %v", r.Case, r.Err, tc.err)
		case (tc.err == nil || !errors.Is(r.Err, tc.err)) && launchFailed(r.Err):
			return fmt.Errorf("%s failed to launch the plugin, not on its rule: %s", r.Case, r.Detail)
		}
	}
	return nil
}

// launchFailed reports whether a case's error is a failure to start the
// plugin or to take its handshake.
func launchFailed(err error) bool {
	var le *launchError
	if errors.As(err, &le) {
		return true
	}
	for _, e := range []error{ErrPath, ErrDigest, ErrExited, ErrStartTimeout, ErrHandshake, ErrProof, ErrProtocol} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// TestP8_ACatchNeedsAStartedPlugin judges every row's cases against a Go
// fixture that exits before its handshake and one that hangs before it:
// no row may count either as its misbehaviour caught.
func TestP8_ACatchNeedsAStartedPlugin(t *testing.T) {
	var only []string
	for _, tc := range misbehaviours {
		for _, c := range tc.fail {
			if !slices.Contains(only, c) {
				only = append(only, c)
			}
		}
	}
	for _, mode := range []string{"exit_early", "hang"} {
		t.Run(mode, func(t *testing.T) {
			l := goLauncher(t, "SPICE_FIXTURE_MODE="+mode)
			l.StartTimeout, l.StopGrace = 300*time.Millisecond, 200*time.Millisecond
			rs := runSuiteWith(t, Config{Launcher: l, Only: only, ExitBound: time.Second, CancelBound: time.Second})
			byCase := make(map[string]Result, len(rs))
			for _, r := range rs {
				byCase[r.Case] = r
			}
			for _, tc := range misbehaviours {
				var row []Result
				for _, c := range tc.fail {
					row = append(row, byCase[c])
				}
				assert.Errorf(t, caught(tc, row), "the row %s counts a fixture in mode %s as caught", tc.goMode, mode)
			}
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
