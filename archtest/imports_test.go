package archtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The import decisions on their own, for the cases the fixture cannot hold
// (it has no test libraries: they would need a go.sum and a download).
func TestImportDecisions(t *testing.T) {
	c, err := newChecker(Default(".", "m.example/x"))
	require.NoError(t, err)
	unit := func(dir string) *Unit { return c.unitOf(dir) }

	kernel := []struct {
		path string
		test bool
		ok   bool
	}{
		{"strings", false, true},
		{"encoding/json", false, true},
		{"m.example/x/kernel/bound", false, true},
		{"net/http", false, false},
		{"os", false, false},
		{"os/exec", false, false},
		{"reflect", false, false},
		{"unsafe", false, false},
		{"math/rand/v2", false, false},
		{"testing", false, false},
		{"github.com/stretchr/testify/require", false, false},
		{"m.example/x/workers", false, false},
		{"os", true, true},
		{"testing/synctest", true, true},
		{"github.com/stretchr/testify/require", true, true},
		{"go.uber.org/goleak", true, true},
		{"github.com/other/lib", true, false},
		{"m.example/x/orchestrator", true, false},
		{"m.example/x/kernelish", false, false}, // a prefix of the folder name is not the folder
	}
	for _, tc := range kernel {
		msg := c.kernelImport(tc.path, tc.test)
		require.Equal(t, tc.ok, msg == "", "kernel (test=%v) imports %s: %s", tc.test, tc.path, msg)
	}

	layer := []struct {
		from, path string
		test, ok   bool
	}{
		{"orchestrator", "m.example/x/workers/a", false, true},
		{"orchestrator", "m.example/x/handoff", false, true},
		{"orchestrator", "m.example/x/providers/scripted", false, false},
		{"orchestrator", "m.example/x/providers/scripted", true, true}, // tests may import lower layers
		{"orchestrator", "m.example/x/scheduler", true, false},         // never higher ones
		{"orchestrator", "github.com/stretchr/testify/require", true, true},
		{"orchestrator", "github.com/other/lib", false, false},
		{"orchestrator", "github.com/other/lib", true, false},
		{"workers", "m.example/x/handoff", false, false},
		{"workers", "m.example/x/handoff", true, false}, // same layer is not lower
		{"handoff", "crypto/sha256", false, true},
		{"scheduler", "github.com/hashicorp/go-memdb", false, true},
		{"scheduler", "m.example/x/providers/scripted", false, true},
		{"scheduler", "m.example/x/proof", false, false},
		{"proof", "m.example/x/cmd/spice-orch", false, false},
		{"cmd/spice-orch", "m.example/x/proof", false, true},
		{"cmd/spice-orch", "m.example/x/archtest", false, false},
		{"providers/openai", "m.example/x/providers/openai/sse", false, true},
		{"providers/openai/sse", "m.example/x/providers/openai", false, true},
		{"providers/openai", "m.example/x/providers/internal/wire", false, true},
		{"providers/openai", "m.example/x/providers/scripted", false, false},
		{"providers/openai", "m.example/x/providers", false, false},
		{"providers/openai", "m.example/x/tools/shell", false, false},
		{"providers/openai", "m.example/x/tools/shell", true, false},
		{"tools/shell", "m.example/x/store/sqlite", false, false},
		{"store/sqlite", "modernc.org/sqlite", false, true},
		{"workers", "m.example/x/plugins", false, false},
	}
	for _, tc := range layer {
		u := unit(tc.from)
		require.NotNil(t, u, tc.from)
		msg := c.layerImport(u, tc.from, tc.path, tc.test)
		require.Equal(t, tc.ok, msg == "", "%s (test=%v) imports %s: %s", tc.from, tc.test, tc.path, msg)
	}
}

// TestLayerTableImportsPointDown holds every row of Layers to the rule the
// table exists for: a unit may import only units of a lower layer. The
// levels themselves are held to docs/architecture.md by
// TestArchitectureDocMatchesTheLayerTable.
func TestLayerTableImportsPointDown(t *testing.T) {
	for _, u := range Layers() {
		for _, d := range u.MayImport {
			var below bool
			for _, v := range Layers() {
				below = below || v.Dir == d && v.Level > 0 && v.Level < u.Level
			}
			require.True(t, below, "%s may import %s, which is not below it", u.Dir, d)
		}
	}
}
