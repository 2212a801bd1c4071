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

// buildPlugin is buildPluginErr that fails t.
func buildPlugin(t *testing.T, pkg string) (path, digest string) {
	t.Helper()
	path, digest, err := buildPluginErr(t, pkg)
	require.NoError(t, err)
	return path, digest
}

// buildPluginErr builds the main package pkg (relative to the module root)
// and returns its path and SHA-256. The build is reproducible (no cgo, no
// paths, no VCS stamp), so the digest the ledger pins is the same on every
// clone with the same toolchain and module versions.
func buildPluginErr(t *testing.T, pkg string) (path, digest string, err error) {
	t.Helper()
	builds.Lock()
	defer builds.Unlock()
	if b, ok := builds.done[pkg]; ok {
		return b[0], b[1], nil
	}
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "proof-plugins-")
		if err != nil {
			return "", "", err
		}
		builds.dir, builds.done = dir, make(map[string][2]string)
	}
	goCmd, err := GoCommand()
	if err != nil {
		return "", "", err
	}
	path = filepath.Join(builds.dir, filepath.Base(pkg))
	cmd := exec.Command(goCmd, append(append([]string{}, pluginBuild...), "-o", path, "./"+pkg)...)
	cmd.Dir = moduleRoot(t)
	cmd.Env = append(os.Environ(), pluginEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build %s: %w: %s", pkg, err, out)
	}
	if digest, err = host.Digest(path); err != nil {
		return "", "", err
	}
	builds.done[pkg] = [2]string{path, digest}
	return path, digest, nil
}

// runtimePart is a runtime-tool part over the plugin built from pkg.
func runtimePart(t *testing.T, pkg, name string) *RuntimeToolPart {
	t.Helper()
	rt, err := runtimePartErr(t, pkg, name)
	require.NoError(t, err)
	return rt
}

func runtimePartErr(t *testing.T, pkg, name string) (*RuntimeToolPart, error) {
	t.Helper()
	path, digest, err := buildPluginErr(t, pkg)
	if err != nil {
		return nil, err
	}
	return pinnedPart(path, digest, name)
}

func pinnedPart(path, digest, name string) (*RuntimeToolPart, error) {
	call, err := LoadTranscript("ollama_runtime_call.http")
	if err != nil {
		return nil, err
	}
	return &RuntimeToolPart{
		Plugins:      []host.Config{{Path: path, SHA256: digest, Name: name}},
		Tools:        []string{"echo"},
		ReviewerCall: call,
	}, nil
}

// exitingPluginPart is a runtime-tool part whose plugin, pinned like any
// other, exits before its handshake (the -fault=plugin-exits injection).
func exitingPluginPart(t *testing.T) (*RuntimeToolPart, error) {
	path := filepath.Join(t.TempDir(), "exits")
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		return nil, err
	}
	digest, err := host.Digest(path)
	if err != nil {
		return nil, err
	}
	return pinnedPart(path, digest, "exits")
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
