//go:build unix

package tools_test

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/tools"
)

// A named pipe without a writer must not block fs.read.
func TestFSRead_NamedPipeIsRefusedWithoutBlocking(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, syscall.Mkfifo(filepath.Join(e.root, "pipe"), 0o644))
	e.problem(t, tools.CodeNotAFile, "fs.read", args("path", "pipe"))
}
