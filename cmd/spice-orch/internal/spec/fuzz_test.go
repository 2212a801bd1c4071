package spec_test

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/handoff"
	"github.com/spice-orch/spice-orch/kernel/bound"
)

// FuzzDecodeSpec: any input either decodes to a spec whose parts the
// packages that use them accept, or fails with an *Error; it never panics,
// decoding is deterministic, and the spec is shown as JSON within
// MaxShownBytes.
func FuzzDecodeSpec(f *testing.F) {
	for _, path := range []string{"../../../../examples/review-pair.yaml", "../../../../examples/openai-pair.yaml", "../../../../examples/plugin-pair.yaml", "testdata/bad.yaml"} {
		b, err := os.ReadFile(path)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(minimal))
	f.Add([]byte(`{"pattern":"relay","workers":[{"role":"a","provider":"scripted","script":[{"text":"x"}]},{"role":"b","provider":"openai","model":"m"}]}`))
	f.Add([]byte("pattern: review\nworkers: [&a {role: writer}, *a]\n"))
	f.Add([]byte("a: [[[[[[[[[[[[1]]]]]]]]]]]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := spec.Decode("fuzz.yaml", data)
		if err != nil {
			var se *spec.Error
			require.True(t, errors.As(err, &se), "%T", err)
			require.NotEmpty(t, err.Error())
			return
		}
		require.NotEqual(t, s.Workers[0].Role, s.Workers[1].Role)
		for _, w := range s.Workers {
			require.NoError(t, bound.Name("role", w.Role))
			require.GreaterOrEqual(t, w.MaxTurns, 1)
			require.LessOrEqual(t, w.MaxTurns, spec.MaxTurns)
			if w.Provider == spec.Scripted {
				require.NoError(t, w.Script.Validate())
			}
		}
		_, err = handoff.NewPolicy(s.Handoff.Config())
		require.NoError(t, err)
		shown, err := s.Shown().JSON()
		require.NoError(t, err)
		require.LessOrEqual(t, len(shown), spec.MaxShownBytes)
		require.True(t, json.Valid(shown))
		again, err := spec.Decode("fuzz.yaml", data)
		require.NoError(t, err)
		require.Equal(t, s, again)
	})
}
