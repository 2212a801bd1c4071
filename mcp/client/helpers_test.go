package client

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// fixtureConfig names the test binary as a pinned stdio server.
func fixtureConfig(t testing.TB, env ...string) Config {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	exe, err = filepath.EvalSymlinks(exe)
	require.NoError(t, err)
	d, err := Digest(exe)
	require.NoError(t, err)
	return Config{Name: "fixture", Path: exe, SHA256: d, Env: append([]string{envServe + "=1"}, env...)}
}

func connect(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Connect(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func toolNamed(t *testing.T, s *Server, name string) tool.Tool {
	t.Helper()
	for _, tl := range s.Tools() {
		if tl.Definition().Name() == name {
			return tl
		}
	}
	t.Fatalf("no tool %q", name)
	return nil
}

var callSeq int

func newCall(t *testing.T, name string, args any) tool.Call {
	t.Helper()
	b, err := json.Marshal(args)
	require.NoError(t, err)
	callSeq++
	c, err := tool.NewCall(id.Call("call-"+strconv.Itoa(callSeq)), name, b)
	require.NoError(t, err)
	return c
}

func exec1(t *testing.T, ctx context.Context, s *Server, name string, args any) (tool.Result, error) {
	t.Helper()
	return toolNamed(t, s, name).Execute(ctx, newCall(t, name, args), nil)
}

func readOnlyHint() *sdk.ToolAnnotations { return &sdk.ToolAnnotations{ReadOnlyHint: true} }
