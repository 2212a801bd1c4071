package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// validate refuses a plugin entry that run would refuse, at its line: a
// path that is a directory, a device or missing, a file that is not
// executable, and a pin the file does not match.
func TestValidateRefusesWhatRunRefusesInAPluginEntry(t *testing.T) {
	dir := t.TempDir()
	exe := writeFile(t, dir, "plugin", "#!/bin/sh\nexit 0\n")
	require.NoError(t, os.Chmod(exe, 0o755))
	sum := sha256.Sum256([]byte("#!/bin/sh\nexit 0\n"))
	pin := hex.EncodeToString(sum[:])
	plain := writeFile(t, dir, "plain", "#!/bin/sh\nexit 0\n")
	wrong := strings.Repeat("0", 64)

	for name, c := range map[string]struct{ path, sha, want string }{
		"a directory":      {dir, pin, ":8: plugins[0].path: is a directory, not an executable file"},
		"a device":         {"/dev/null", pin, ":8: plugins[0].path: is a device, not an executable file"},
		"missing":          {filepath.Join(dir, "missing"), pin, ":8: plugins[0].path: no file at this path"},
		"not executable":   {plain, pin, ":8: plugins[0].path: is not executable"},
		"a different file": {exe, wrong, ":9: plugins[0].sha256: does not match the file (its SHA-256 is " + pin + ")"},
	} {
		t.Run(name, func(t *testing.T) {
			file := writeFile(t, t.TempDir(), "pair.yaml", validSpec+"plugins:\n  - path: "+c.path+"\n    sha256: \""+c.sha+"\"\n")
			_, stderr, code := call(t, nil, "validate", file)
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stderr, file+c.want)
			_, stderr, code = call(t, nil, "run", file, "--no-store")
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stderr, file+c.want)
		})
	}
}
