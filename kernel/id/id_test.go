package id_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
)

func TestK2_IDBound(t *testing.T) {
	_, err := id.Parse[id.Run]("run_id", strings.Repeat("a", bound.MaxIDBytes))
	require.NoError(t, err)
	_, err = id.Parse[id.Run]("run_id", strings.Repeat("a", bound.MaxIDBytes+1))
	var be *bound.Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, bound.TooLarge, be.Rule)
	require.Equal(t, "run_id", be.Field)
}

func TestParseRejectsBadSyntax(t *testing.T) {
	for _, bad := range []string{"", "a b", "a\nb", "é", "a\x00"} {
		_, err := id.Parse[id.Call]("call_id", bad)
		require.ErrorIs(t, err, bound.ErrInvalid, "%q", bad)
	}
	v, err := id.Parse[id.Call]("call_id", "call_01:A/b-c.d")
	require.NoError(t, err)
	require.Equal(t, id.Call("call_01:A/b-c.d"), v)
}

func TestK30_CounterIsDeterministicPerKind(t *testing.T) {
	var c id.Counter
	require.Equal(t, "run-1", c.New(id.KindRun))
	require.Equal(t, "turn-1", c.New(id.KindTurn))
	require.Equal(t, "turn-2", c.New(id.KindTurn))
	require.Equal(t, "op-1", c.New(id.KindOperation))
	require.Equal(t, "ix-1", c.New(id.KindInteraction))
	p := id.Counter{Prefix: "a/"}
	require.Equal(t, "a/run-1", p.New(id.KindRun))
	require.NoError(t, id.Check("id", p.New(id.KindRun)))
}

func TestCounterNeverRepeatsUnderConcurrency(t *testing.T) {
	var c id.Counter
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				s := c.New(id.KindOperation)
				mu.Lock()
				require.False(t, seen[s], s)
				seen[s] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 1600)
}

func FuzzParse(f *testing.F) {
	f.Add("run-1")
	f.Add("")
	f.Add("a b")
	f.Add(strings.Repeat("x", 200))
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4*bound.MaxIDBytes {
			s = s[:4*bound.MaxIDBytes]
		}
		v, err := id.Parse[id.Interaction]("interaction_id", s)
		if err != nil {
			var be *bound.Error
			if !errors.As(err, &be) {
				t.Fatalf("untyped error %T", err)
			}
			if v != "" {
				t.Fatal("value returned with error")
			}
			return
		}
		if string(v) != s || len(s) == 0 || len(s) > bound.MaxIDBytes {
			t.Fatalf("accepted %q", s)
		}
	})
}
