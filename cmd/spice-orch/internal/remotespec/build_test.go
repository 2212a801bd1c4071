package remotespec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/providers/openai"
	"github.com/spice-orch/spice-orch/server"
)

type discard struct{}

func (discard) Observe(context.Context, eventlog.Event) error { return nil }

const twoScripted = `version: 1
pattern: relay
workers:
  - role: writer
    provider: scripted
    script:
      - text: done
  - role: reviewer
    provider: scripted
    script:
      - text: fine
`

func build(t *testing.T, b *Builder, body string) server.Built {
	t.Helper()
	never, err := orchestrator.ParseApprovalPolicy("never")
	require.NoError(t, err)
	b.Approve = never
	ws := t.TempDir()
	built, err := b.Build(t.Context(), server.BuildRequest{PairID: "pair-1", Workspace: ws, Body: []byte(body),
		ContentType: "application/yaml", Timeline: discard{}})
	require.NoError(t, err)
	t.Cleanup(built.Close)
	return built
}

// TestS2_ThePluginOfPluginDevIsNotShown: the plugin plugin dev --serve
// adds to every pair is the operator's: the pair plays it, and the spec
// shown to clients names neither it nor where it lies.
func TestS2_ThePluginOfPluginDevIsNotShown(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "operator-builds")
	path := filepath.Join(dir, "wordcount")
	goTool, err := exec.LookPath("go")
	require.NoError(t, err)
	out, err := exec.Command(goTool, "build", "-o", path, "../../../../plugins/examples/wordcount").CombinedOutput()
	require.NoError(t, err, string(out))
	exe, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(exe)
	p := spec.Plugin{Path: path, SHA256: hex.EncodeToString(sum[:])}

	built := build(t, &Builder{Plugin: func() (spec.Plugin, bool) { return p, true }}, twoScripted)
	l, err := built.Config.Plans.Lease(t.Context())
	require.NoError(t, err)
	var names []string
	for d := range l.Plan().Definitions() {
		names = append(names, d.Name())
	}
	require.NoError(t, l.Release(t.Context()))
	require.Contains(t, names, "words.count", "the pair plays the operator's plugin")
	require.NotEmpty(t, built.Spec)
	for _, hidden := range []string{dir, "wordcount", p.SHA256, `"plugins"`} {
		require.NotContains(t, string(built.Spec), hidden)
	}
}

// TestS2_TheServersKeyIsTakenOutBeforeAnyTextIsCut: a client that pastes
// the server's key into a task too long to show in full gets no part of
// it shown where the task is cut.
func TestS2_TheServersKeyIsTakenOutBeforeAnyTextIsCut(t *testing.T) {
	const key = "sk-cut-0123456789abcdefghijklmnop"
	// The key straddles the point where a long task is cut; backslashes
	// (two bytes each in JSON) put the spec over its bound.
	task := strings.Repeat("x", 4096-len(key)/2) + key + strings.Repeat(`\`, 200<<10)
	body := strings.Replace(twoScripted, "pattern: relay\n", "pattern: relay\ntask: '"+task+"'\n", 1)
	built := build(t, &Builder{Getenv: func(name string) string {
		if name == openai.EnvAPIKey {
			return key
		}
		return ""
	}}, body)
	require.LessOrEqual(t, len(built.Spec), spec.MaxShownBytes)
	require.Contains(t, string(built.Spec), "more bytes not shown]", "the task is cut")
	shown := built.Redact(string(built.Spec))
	for _, part := range []string{key, key[:len(key)/2], key[len(key)/2:]} {
		require.NotContains(t, shown, part)
	}
}
