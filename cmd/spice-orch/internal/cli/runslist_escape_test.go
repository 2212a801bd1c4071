package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The store path `runs list` names comes from a flag or the environment:
// it is shown escaped like every other value, never with its raw control
// bytes, since a hostile path could otherwise drive the terminal.
func TestRunsListShowsTheStorePathEscaped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a\x1b]0;pwned\x07b")
	for name, args := range map[string][]string{
		"no store yet":   {"runs", "list", "--store", filepath.Join(dir, "none.db")},
		"an empty store": {"runs", "list", "--store", filepath.Join(dir, "empty.db")},
	} {
		t.Run(name, func(t *testing.T) {
			if name == "an empty store" {
				st, err := openStore(t.Context(), args[3], true)
				require.NoError(t, err)
				require.NoError(t, st.Close())
			}
			out, stderr, code := call(t, nil, args...)
			require.Equal(t, 0, code, stderr)
			require.NotContains(t, out, "\x1b", "raw ESC on stdout")
			require.NotContains(t, out, "\x07", "raw BEL on stdout")
			require.True(t, strings.Contains(out, `a\x1b]0;pwned\x07b`), out)
		})
	}
}
