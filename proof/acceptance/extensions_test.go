package acceptance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// pluginBuild is the go command that builds a plugin, and the
// environment it adds.
var (
	pluginBuild = []string{"build", "-trimpath", "-buildvcs=false"}
	pluginEnv   = []string{"CGO_ENABLED=0", "GOFLAGS="}
)

// builds are the plugins built by this test binary, by package, in one
// temporary directory that TestMain removes: each is built once.
var builds struct {
	sync.Mutex
	dir  string
	done map[string][2]string
}

func removeBuilds() {
	builds.Lock()
	defer builds.Unlock()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
	}
}

// buildPlugin builds the main package pkg (relative to the module root)
// and returns its path and SHA-256. The build is reproducible (no cgo, no
// paths, no VCS stamp), so the digest the ledger pins is the same on every
// clone with the same toolchain and module versions.
func buildPlugin(t *testing.T, pkg string) (path, digest string) {
	t.Helper()
	builds.Lock()
	defer builds.Unlock()
	if b, ok := builds.done[pkg]; ok {
		return b[0], b[1]
	}
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "proof-plugins-")
		require.NoError(t, err)
		builds.dir, builds.done = dir, make(map[string][2]string)
	}
	goCmd, err := GoCommand()
	require.NoError(t, err)
	path = filepath.Join(builds.dir, filepath.Base(pkg))
	cmd := exec.Command(goCmd, append(append([]string{}, pluginBuild...), "-o", path, "./"+pkg)...)
	cmd.Dir = moduleRoot(t)
	cmd.Env = append(os.Environ(), pluginEnv...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkg, out)
	digest, err = host.Digest(path)
	require.NoError(t, err)
	builds.done[pkg] = [2]string{path, digest}
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

// runtimeEvidence is the ledger's evidence of the runtime-tool part; the
// plugin's digest and generation/lease timeline go to its own section.
func runtimeEvidence(l *Ledger, rep *RuntimeReport) string {
	if rep == nil {
		return ""
	}
	l.Plugin = &PluginRecord{
		Package:  FixturePlugin,
		Build:    strings.Join(pluginEnv, " ") + " go " + strings.Join(pluginBuild, " "),
		Digests:  rep.Digests,
		Timeline: rep.Timeline,
	}
	return fmt.Sprintf("the reviewer called the Go fixture plugin's echo (SHA-256 %s) in the pair's one leased plan, host.NewSource over fs.write and the plugin generation; %d generation/lease events, every plugin PID gone after the host stopped",
		strings.Join(rep.Digests, ", "), len(rep.Timeline))
}
