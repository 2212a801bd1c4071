package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lines is an output that tells a waiting test when it grew.
type lines struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	grew chan struct{}
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	select {
	case l.grew <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// await waits, within a bound, until the output holds s.
func (l *lines) await(t *testing.T, s string) {
	t.Helper()
	timeout := time.NewTimer(3 * time.Minute)
	defer timeout.Stop()
	for !strings.Contains(l.String(), s) {
		select {
		case <-l.grew:
		case <-timeout.C:
			t.Fatalf("no %q in:\n%s", s, l.String())
		}
	}
}

// wordcountModule copies the example plugin into a module of its own
// that builds against this one, its requirements resolved from the
// module cache. A build, not "go mod tidy": tidy also resolves the
// tests of every dependency, whose modules a fresh cache has not got.
func wordcountModule(t *testing.T) (dir, src string) {
	t.Helper()
	root, err := filepath.Abs("../../../..")
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "plugins/examples/wordcount/main.go"))
	require.NoError(t, err)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	dir = filepath.Join(t.TempDir(), "wordcount")
	require.NoError(t, os.Mkdir(dir, 0o755))
	mod := "module example.com/wordcount\n\ngo 1.26.0\n\nrequire github.com/spice-orch/spice-orch v0.0.0\n\nreplace github.com/spice-orch/spice-orch => " + root + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), b, 0o644))
	cmd := exec.Command("go", "build", "-mod=mod", "-o", os.DevNull, ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "GOPROXY=off", "GOFLAGS=", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return dir, string(b)
}

func TestL3_PluginDevPlaysEachActivationAndNamesTheMistakesLine(t *testing.T) {
	dir, src := wordcountModule(t)
	spec := filepath.Join(t.TempDir(), "plugin-pair.yaml")
	b, err := os.ReadFile("../../../../examples/plugin-pair.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(spec, b, 0o644))

	out := &lines{grew: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"plugin", "dev", "--out", filepath.Join(t.TempDir(), "builds"), "--debounce", "50ms",
			"--run", spec, "--no-store", dir}, Env{Stdout: out, Stderr: out, Getenv: func(string) string { return "" }})
	}()
	defer func() {
		cancel()
		require.Equal(t, 0, <-done, out.String())
	}()

	out.await(t, "wordcount-c1: sha256 ")
	out.await(t, " active as wordcount-g1 (build ")
	out.await(t, spec+": plugins[0] pinned to sha256 ")
	out.await(t, "pair completed: approved")
	pinned, err := os.ReadFile(spec)
	require.NoError(t, err)
	require.Contains(t, string(pinned), filepath.Join("builds"), "the spec names the content-addressed build")

	bad := strings.Replace(src, "strings.Fields(a.Text)", "strings.Feilds(a.Text)", 1)
	require.NotEqual(t, src, bad)
	line := 1 + strings.Count(bad[:strings.Index(bad, "strings.Feilds")], "\n")
	tmp := filepath.Join(dir, ".main.go.tmp")
	require.NoError(t, os.WriteFile(tmp, []byte(bad), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "main.go")))
	out.await(t, "wordcount-c2 failed (build); wordcount-g1 stays active\nmain.go:"+strconv.Itoa(line)+": undefined: strings.Feilds\n")
}

// The serve of plugin dev runs a build of the working tree and has no
// token: it listens on loopback only.
func TestL3_PluginDevServesOnLoopbackOnly(t *testing.T) {
	var out strings.Builder
	code := Main(t.Context(), []string{"plugin", "dev", "--serve", "0.0.0.0:0", t.TempDir()},
		Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }})
	require.Equal(t, 2, code, out.String())
	require.Contains(t, out.String(), "--serve: ")
	require.NotContains(t, out.String(), "watching")
}
