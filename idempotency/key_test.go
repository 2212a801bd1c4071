package idempotency_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/idempotency"
	"github.com/spice-orch/spice-orch/kernel/bound"
)

func TestR5_KeyIsDerivedFromPairRunAndCall(t *testing.T) {
	k := idempotency.Derive("pair-1", "pair-1/writer/run-1", "call-1")
	// A fixed vector (computed independently: SHA-256 over the four
	// length-prefixed strings): the key must be the same in every process and
	// every release, or a resumed pair would not recognise its calls.
	require.Equal(t, idempotency.Key("98dd1a47fbd1eeae64d43ea44567f9f03e6427fc3a30813eda9c7467840db633"), k)
}

func TestR5_KeysOfDifferentCallsDiffer(t *testing.T) {
	base := idempotency.Derive("p", "r", "c")
	for _, k := range []idempotency.Key{
		idempotency.Derive("p2", "r", "c"),
		idempotency.Derive("p", "r2", "c"),
		idempotency.Derive("p", "r", "c2"),
		// Length prefixes: moving a byte from one ID to the next is
		// another triple.
		idempotency.Derive("pr", "", "c"),
		idempotency.Derive("p", "rc", ""),
	} {
		require.NotEqual(t, base, k)
	}
	parsed, err := idempotency.Parse(base.String())
	require.NoError(t, err)
	require.Equal(t, base, parsed)
}

func TestR5_ParseRefusesWhatIsNotAKey(t *testing.T) {
	for _, s := range []string{"", "abc", strings.Repeat("A", 64), strings.Repeat("g", 64), strings.Repeat("a", 65)} {
		_, err := idempotency.Parse(s)
		require.ErrorIs(t, err, bound.ErrInvalid, "%q", s)
	}
}

func TestR5_ContextCarriesTheKey(t *testing.T) {
	ctx := context.Background()
	_, ok := idempotency.FromContext(ctx)
	require.False(t, ok)
	require.Equal(t, ctx, idempotency.WithKey(ctx, ""))
	k := idempotency.Derive("p", "r", "c")
	got, ok := idempotency.FromContext(idempotency.WithKey(ctx, k))
	require.True(t, ok)
	require.Equal(t, k, got)
}

func FuzzParse(f *testing.F) {
	f.Add(strings.Repeat("0", 64))
	f.Add("xyz")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := idempotency.Parse(s)
		if err != nil {
			return
		}
		require.Len(t, k.String(), idempotency.Len)
		again, err := idempotency.Parse(k.String())
		require.NoError(t, err)
		require.Equal(t, k, again)
	})
}
