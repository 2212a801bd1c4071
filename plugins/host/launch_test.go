package host

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/tool"
)

func TestP1_RelativePathAndPathLookupRefused(t *testing.T) {
	for _, path := range []string{"goplugin", "./goplugin", "fixtures/goplugin", "/tmp/../tmp/x"} {
		_, err := Launch(t.Context(), Config{Path: path, SHA256: strings.Repeat("a", 64)})
		require.ErrorIs(t, err, ErrRelativePath, path)
	}
	_, err := Digest("goplugin")
	require.ErrorIs(t, err, ErrRelativePath)
}

func TestP1_BadPinRefused(t *testing.T) {
	for _, pin := range []string{"", "abc", strings.Repeat("A", 64), strings.Repeat("g", 64)} {
		_, err := Launch(t.Context(), Config{Path: fixtureV1, SHA256: pin})
		require.ErrorIs(t, err, ErrConfig)
	}
}

func TestP1_DigestMismatchRefusedBeforeExec(t *testing.T) {
	cfg := config(t, fixtureV1, "")
	cfg.SHA256 = digestOf(t, fixtureV2)
	le := requireLaunchFails(t, cfg, ErrDigest)
	require.Empty(t, le.Stderr, "nothing ran")
	require.Contains(t, le.Error(), cfg.SHA256)
}

func TestP1_DirectoryAndNonExecutableRefused(t *testing.T) {
	dir := t.TempDir()
	_, err := Launch(t.Context(), Config{Path: dir, SHA256: strings.Repeat("a", 64)})
	require.ErrorIs(t, err, ErrNotExecutable)
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o600))
	_, err = Launch(t.Context(), Config{Path: plain, SHA256: digestOf(t, plain)})
	require.ErrorIs(t, err, ErrNotExecutable)
}

// copyFile copies src to dst with mode 0755.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, b, 0o755))
}

func TestP1_PathSwapAfterCheckRunsTheVerifiedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plugin")
	copyFile(t, fixtureV1, path)
	cfg := config(t, path, "")
	cfg.afterVerify = func(path string) {
		// Another binary is renamed over the path after the check.
		tmp := path + ".new"
		copyFile(t, fixtureV2, tmp)
		require.NoError(t, os.Rename(tmp, path))
	}
	p := launch(t, cfg)
	require.Equal(t, "1.0.0", p.Manifest().Version, "the verified file ran, not the swapped one")
	require.Equal(t, digestOf(t, fixtureV2), digestOf(t, path), "the path names the swapped file")
	require.Equal(t, cfg.SHA256, p.Manifest().Digest)
}

// The launch runs its private copy, verified after it was written: an
// overwrite of the pinned file in place after the check runs nothing new.
func TestP1_OverwriteInPlaceAfterCheckRunsTheVerifiedBytes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plugin")
	copyFile(t, fixtureV1, path)
	cfg := config(t, path, "")
	cfg.afterVerify = func(path string) {
		b, err := os.ReadFile(fixtureV2)
		require.NoError(t, err)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(t, err)
		_, err = f.Write(b)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	p := launch(t, cfg)
	require.Equal(t, "1.0.0", p.Manifest().Version, "the verified bytes ran")
	require.Equal(t, digestOf(t, fixtureV2), digestOf(t, path), "the path holds the other build")
}

// recordingRandom records the secrets it hands out.
type recordingRandom struct {
	mu  sync.Mutex
	got [][]byte
}

func (r *recordingRandom) Read(b []byte) (int, error) {
	n, err := rand.Read(b)
	r.mu.Lock()
	r.got = append(r.got, bytes.Clone(b[:n]))
	r.mu.Unlock()
	return n, err
}

func TestP2_FreshSecretPerLaunchNeverOnTheCommandLine(t *testing.T) {
	rr := &recordingRandom{}
	var pids []int
	for range 2 {
		cfg := config(t, fixtureV1, "")
		cfg.Random = rr
		p := launch(t, cfg)
		pids = append(pids, p.PID())
		secret := hex.EncodeToString(rr.got[len(rr.got)-1])
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID()) + "/" + f)
			require.NoError(t, err)
			require.NotContains(t, string(b), secret, f)
		}
		// Calls work: both sides proved the secret.
		res, err := p.Tools()[1].Execute(t.Context(), call(t, "c1", "echo", `{"text":"hi"}`), nil)
		require.NoError(t, err)
		require.Equal(t, "hi", res.Content())
	}
	require.Len(t, rr.got, 2)
	require.NotEqual(t, rr.got[0], rr.got[1])
	require.NotEqual(t, pids[0], pids[1])
}

func TestP2_PluginThatCannotProveTheSecretRefused(t *testing.T) {
	requireLaunchFails(t, config(t, fixtureV1, "bad_proof"), ErrProof)
}

func TestP2_HostThatCannotProveTheSecretIsRefusedByThePlugin(t *testing.T) {
	p := launch(t, config(t, fixtureV1, ""))
	// A client with the wrong proof: the plugin refuses before reading.
	bad, err := newConn(p.target, "0000", p.cfg)
	require.NoError(t, err)
	defer bad.Close()
	other := &Plugin{manifest: p.manifest, conn: bad, slots: make(chan struct{}, 1),
		closing: p.closing, exited: p.exited, forced: p.forced}
	_, err = (&Tool{p: other, def: p.tools[1].def}).Execute(t.Context(), call(t, "c1", "echo", `{"text":"x"}`), nil)
	ee := execErr(t, err)
	require.Equal(t, CodeUnauthenticated, ee.Problem().Code())
	require.Equal(t, tool.Definitive, ee.Outcome())
}

func TestP2_StdoutContaminationFailsTheLaunch(t *testing.T) {
	requireLaunchFails(t, config(t, fixtureV1, "stdout_noise"), ErrContaminated)
}

func TestP2_ExitBeforeTheHandshakeKeepsItsStderr(t *testing.T) {
	le := requireLaunchFails(t, config(t, fixtureV1, "exit_early"), ErrExited)
	require.Contains(t, strings.Join(le.Stderr, "\n"), "exiting before the handshake")
}

func TestP3_ProtocolVersionMismatchRefused(t *testing.T) {
	for _, mode := range []string{"protocol_old", "protocol_new", "line_version"} {
		t.Run(mode, func(t *testing.T) { requireLaunchFails(t, config(t, fixtureV1, mode), ErrProtocol) })
	}
}

func TestP3_ContradictoryManifestRefused(t *testing.T) {
	le := requireLaunchFails(t, config(t, fixtureV1, "bad_manifest"), ErrManifest)
	require.Contains(t, le.Error(), "read-only tool cannot hold capability fs.write")
}

func TestP3_ManifestIdentityChecked(t *testing.T) {
	cfg := config(t, fixtureV1, "")
	cfg.Name = "someone-else"
	requireLaunchFails(t, cfg, ErrManifest)
	cfg.Name = "fixture"
	p := launch(t, cfg)
	m := p.Manifest()
	require.Equal(t, uint32(1), m.Protocol)
	require.Equal(t, "fixture", m.Name)
	var names []string
	write := -1
	for i, d := range m.Tools {
		names = append(names, d.Name())
		if d.Name() == "write" {
			write = i
		}
	}
	require.Equal(t, []string{"blob", "echo", "fail_definitive", "fail_uncertain", "hold", "idempotency_key", "problem", "progress",
		"slow", "slow_inflight", "write", "write_file"}, names)
	require.Equal(t, tool.Mutating, m.Tools[write].Effect())
	require.True(t, m.Tools[write].HasCapability(tool.FilesystemWrite))
}

func TestP5_StartupTimeout(t *testing.T) {
	cfg := config(t, fixtureV1, "hang")
	cfg.StartupTimeout = 300 * time.Millisecond
	start := time.Now()
	requireLaunchFails(t, cfg, ErrStartTimeout)
	require.Less(t, time.Since(start), 10*time.Second)
}

func TestP5_StderrFloodStaysBoundedAndNeverBlocksThePlugin(t *testing.T) {
	cfg := config(t, fixtureV1, "stderr_flood")
	cfg.MaxStderrLines = 10
	cfg.MaxStderrBytes = 1000
	// The fixture writes 4 MB to stderr before its handshake: the launch
	// succeeds only if the host reads stderr while it waits.
	p := launch(t, cfg)
	lines := p.Stderr()
	total := 0
	for _, l := range lines {
		total += len(l)
	}
	require.LessOrEqual(t, len(lines), 10)
	require.LessOrEqual(t, total, 1000)
	require.NotEmpty(t, lines)
}

func TestP5_StderrTailCutsLongLines(t *testing.T) {
	tl := &tail{maxLines: 3, maxBytes: 100, maxLine: 10}
	tl.read(io.MultiReader(strings.NewReader(strings.Repeat("x", 5000) + "\nshort\nlast")))
	require.Equal(t, []string{"xxxxxxxxxx [cut]", "short", "last"}, tl.snapshot())
}

func TestP5_BoundsValidated(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"negative call timeout": func(c *Config) { c.CallTimeout = -1 },
		"handshake over 1024":   func(c *Config) { c.MaxHandshakeBytes = 2048 },
		"negative stderr":       func(c *Config) { c.MaxStderrBytes = -1 },
		"secret in env":         func(c *Config) { c.Env = []string{"SPICE_PLUGIN_DIR=/tmp"} },
	} {
		cfg := config(t, fixtureV1, "")
		mut(&cfg)
		_, err := Launch(t.Context(), cfg)
		require.ErrorIs(t, err, ErrConfig, name)
	}
}
