package host

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/idempotency"
)

func TestR5_PluginsReceiveTheCallsKey(t *testing.T) {
	p := launch(t, config(t, fixtureV1, ""))
	d := dispatcher(t, p.Tools()...)
	k := idempotency.Derive("pair-1", "run-1", "c1")
	res, err := d.Dispatch(idempotency.WithKey(t.Context(), k), call(t, "c1", "idempotency_key", `{}`), nil)
	require.NoError(t, err)
	require.Equal(t, k.String(), res.Content(), "the key crossed the process boundary in the request's metadata")

	// A call without a key carries none.
	res, err = d.Dispatch(context.Background(), call(t, "c2", "idempotency_key", `{}`), nil)
	require.NoError(t, err)
	require.Empty(t, res.Content())
}
