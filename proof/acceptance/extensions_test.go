package acceptance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/plugins/host"
)

// The two parts whose packages landed after the suite: the runtime tool
// (plugins/host) and the alternate client (server).

// FixturePlugin and PanicPlugin are the plugins the proof builds.
const (
	FixturePlugin = "plugins/fixtures/goplugin"
	PanicPlugin   = "proof/acceptance/internal/panicplugin"
)

// buildPlugin builds the main package pkg (relative to the module root)
// into a fresh temporary directory and returns its path and SHA-256. The
// build is reproducible (no cgo, no paths, no VCS stamp), so the digest
// the ledger pins is the same on every clone with the same toolchain.
func buildPlugin(t *testing.T, pkg string) (path, digest string) {
	t.Helper()
	goCmd, err := GoCommand()
	require.NoError(t, err)
	path = filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command(goCmd, "build", "-trimpath", "-buildvcs=false", "-o", path, "./"+pkg)
	cmd.Dir = moduleRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkg, out)
	digest, err = host.Digest(path)
	require.NoError(t, err)
	return path, digest
}

// runtimePart is a runtime-tool part over the plugin built from pkg.
func runtimePart(t *testing.T, pkg, name string) *RuntimeToolPart {
	t.Helper()
	path, digest := buildPlugin(t, pkg)
	call, err := LoadTranscript("ollama_runtime_call.http")
	require.NoError(t, err)
	return &RuntimeToolPart{
		Plugins:      []host.Config{{Path: path, SHA256: digest, Name: name}},
		Tools:        []string{"echo"},
		ReviewerCall: call,
	}
}

// runtimeToolPart is the runtime-tool part: the Go fixture plugin, built
// and pinned by its SHA-256, served by the plugin host as a generation of
// the pair's plan source beside the compiled tools; the reviewer calls its
// echo tool before its first review.
func runtimeToolPart(t *testing.T) *RuntimeToolPart {
	t.Helper()
	return runtimePart(t, FixturePlugin, "fixture")
}

// alternateClient is the alternate-client part: the serve API on
// 127.0.0.1:0, which runs the pair, read by a plain HTTP client of its SSE
// stream of the pair timeline.
func alternateClient(t *testing.T) AlternateClient {
	t.Helper()
	c := NewServeClient(t.TempDir())
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// runtimeEvidence is the ledger's evidence of the runtime-tool part: the
// plugin's digest and its generation/lease timeline.
func runtimeEvidence(rep *RuntimeReport) string {
	if rep == nil {
		return ""
	}
	return "the reviewer called the Go fixture plugin's echo (sha256 " + strings.Join(rep.Digests, ", ") +
		") under the pair's one leased plan (host.NewSource: fs.write and the plugin generation); generation/lease timeline: " +
		strings.Join(rep.Timeline, "; ")
}
