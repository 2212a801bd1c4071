package scripted_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/providers/scripted"
)

// FuzzDecodeScript holds DecodeScript to its contract on arbitrary bytes: a
// *bound.Error or a script that NewProvider accepts and whose streams pass
// the kernel's Assembler.
func FuzzDecodeScript(f *testing.F) {
	f.Add(scripted.BuiltinJSON())
	f.Add([]byte(`{"steps":[{"match":"re:(?i)x","text":"a b","calls":[{"name":"echo","arguments":{"a":[1]}}],"usage":{"input":1}}]}`))
	f.Add([]byte(`{"steps":[{"match":"not:text:y","text":"\u00e9"}]}`))
	f.Add([]byte(`{"steps":[]}`))
	f.Add([]byte(`{"steps":[{"text":"x"}]}x`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return // the size bound itself is tested in TestDecodeScript_IsStrict
		}
		s, err := scripted.DecodeScript(data)
		if err != nil {
			var be *bound.Error
			require.True(t, errors.As(err, &be), "untyped error %v", err)
			return
		}
		p, err := scripted.NewProvider(s)
		require.NoError(t, err)
		st, err := p.Stream(context.Background(), request(t, "op-1", user("input")))
		require.NoError(t, err)
		items := drain(t, st)
		_, err = st.Recv()
		require.True(t, errors.Is(err, scripted.ErrClosed) || errors.Is(err, io.EOF))
		require.NotEmpty(t, items)
	})
}
