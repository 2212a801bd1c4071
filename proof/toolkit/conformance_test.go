package toolkit_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/proof/toolkit"
	"github.com/spice-orch/spice-orch/tools"
)

// The project's compiled tools pass the kit they offer third parties.

func TestFSWriteConforms(t *testing.T) {
	toolkit.Run(t, toolkit.Config{
		New: func(t *testing.T) tool.Tool {
			w, err := tools.NewFSWrite(tools.Config{Root: t.TempDir()})
			require.NoError(t, err)
			return w
		},
		Valid:   json.RawMessage(`{"path":"notes/a.md","content":"hello"}`),
		Invalid: json.RawMessage(`{"path":"../outside.md","content":"hello"}`),
	})
}

func TestFSReadConforms(t *testing.T) {
	toolkit.Run(t, toolkit.Config{
		New: func(t *testing.T) tool.Tool {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "a.md"), []byte("hello"), 0o644))
			r, err := tools.NewFSRead(tools.Config{Root: dir})
			require.NoError(t, err)
			return r
		},
		Valid:   json.RawMessage(`{"path":"a.md"}`),
		Invalid: json.RawMessage(`{"path":"missing.md"}`),
	})
}

func TestTextStatsConforms(t *testing.T) {
	toolkit.Run(t, toolkit.Config{
		New: func(t *testing.T) tool.Tool {
			s, err := tools.NewTextStats()
			require.NoError(t, err)
			return s
		},
		Valid:   json.RawMessage(`{"text":"one two\nthree"}`),
		Invalid: json.RawMessage(`{"text":3}`),
	})
}
