package spec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
)

func TestM1_SpecMCPServersNeedAbsolutePathsAndPins(t *testing.T) {
	s, err := spec.DecodeFile("../../../../examples/mcp-pair.yaml")
	require.NoError(t, err)
	require.Len(t, s.MCPServers, 2)
	fs := s.MCPServers[0]
	require.Equal(t, "files", fs.Name)
	require.Equal(t, "/path/to/node", fs.Path)
	require.Equal(t, &spec.FilePin{Path: "/path/to/package-lock.json", SHA256: strings.Repeat("3", 64)}, fs.Lock)
	require.Equal(t, []string{spec.WorkspaceArg}, fs.Args)
	require.Equal(t, spec.MCPTool{Effect: "mutating", Replay: "idempotent"}, fs.Tools["write_file"])

	pin := strings.Repeat("a", 64)
	for entry, want := range map[string]string{
		`{name: a, path: node, sha256: "` + pin + `"}`:                                                    "mcp_servers[0].path: must be a clean absolute path",
		`{name: a, path: /bin/node, sha256: "ABC"}`:                                                       "mcp_servers[0].sha256: must be 64 lower-case hex",
		`{name: a, path: /bin/node, sha256: "` + pin + `", entry: {path: x.js, sha256: "` + pin + `"}}`:   "mcp_servers[0].entry.path: must be a clean absolute path",
		`{name: a, path: /bin/node, sha256: "` + pin + `", lock: {path: /l, sha256: "` + pin + `"}}`:      "give entry too",
		`{name: a, url: "http://127.0.0.1:1/mcp", path: /bin/node}`:                                       "an HTTP server (url) is not launched",
		`{name: a, path: /bin/node, sha256: "` + pin + `", env: [NOEQUALS]}`:                              "want KEY=value",
		`{name: a, path: /bin/node, sha256: "` + pin + `", tools: {t: {effect: mutating}}}`:               "declare effect and replay together",
		`{name: a, path: /bin/node, sha256: "` + pin + `", tools: {t: {digest: "x"}}}`:                    "mcp_servers[0].tools.t.digest: must be 64",
		`{name: a, path: /bin/node, sha256: "` + pin + `", tools: {t: {effect: sideways, replay: safe}}}`: "must be one of read_only, mutating",
	} {
		_, err := spec.Decode("m.yaml", []byte(minimal+"mcp_servers:\n  - "+entry+"\n"))
		var se *spec.Error
		require.True(t, errors.As(err, &se), entry)
		require.Contains(t, err.Error(), want, entry)
	}
}
