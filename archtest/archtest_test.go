package archtest

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const modulePath = "github.com/spice-orch/spice-orch"

// TestModule holds this module to its layer table (Layers, shown in
// docs/architecture.md): the kernel is pure and imports point down. Each failure line names the file,
// the line and the rule.
func TestModule(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	require.Equal(t, modulePath, readModulePath(t, filepath.Join(root, "go.mod")))

	vs, err := Check(context.Background(), Default(root, modulePath))
	require.NoError(t, err)
	for _, v := range vs {
		t.Error(v)
	}
	if len(vs) > 0 {
		t.Log("the rules are described in archtest/doc.go; the tables are in archtest/layers.go")
	}
}

func readModulePath(t *testing.T, gomod string) string {
	t.Helper()
	f, err := os.Open(gomod)
	require.NoError(t, err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.TrimSpace(rest)
		}
	}
	require.NoError(t, s.Err())
	t.Fatalf("%s has no module line", gomod)
	return ""
}
