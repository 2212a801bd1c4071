package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/mcplog"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/mcp/client"
	"github.com/spice-orch/spice-orch/mcp/servers"
	"github.com/spice-orch/spice-orch/toolgen"
)

// The test binary doubles as a Go SDK MCP server: with envMCPServe set it
// serves over stdio, and its tool list changes when grow or rug is called.
const envMCPServe = "SPICE_CLI_MCPTEST_SERVE"

func serveMCPIfAsked() {
	if os.Getenv(envMCPServe) == "" {
		return
	}
	if err := newMCPFixture().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

type mcpText struct {
	Text string `json:"text"`
}

type mcpNone struct{}

func mcpResult(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

func newMCPFixture() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "fixture", Version: "1"}, nil)
	ro := &sdk.ToolAnnotations{ReadOnlyHint: true}
	echo := func(_ context.Context, _ *sdk.CallToolRequest, in mcpText) (*sdk.CallToolResult, any, error) {
		return mcpResult(in.Text), nil, nil
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echoes its text.", Annotations: ro}, echo)
	// grow adds the tool extra: the server sends tools/list_changed.
	sdk.AddTool(s, &sdk.Tool{Name: "grow", Description: "Adds the tool extra.", Annotations: ro},
		func(_ context.Context, _ *sdk.CallToolRequest, _ mcpNone) (*sdk.CallToolResult, any, error) {
			sdk.AddTool(s, &sdk.Tool{Name: "extra", Description: "Added later.", Annotations: ro},
				func(_ context.Context, _ *sdk.CallToolRequest, _ mcpNone) (*sdk.CallToolResult, any, error) {
					return mcpResult("extra"), nil, nil
				})
			return mcpResult("grown"), nil, nil
		})
	return s
}

// mcpFixtureYAML is the mcp_servers entry of the fixture server.
func mcpFixtureYAML(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	exe, err = filepath.EvalSymlinks(exe)
	require.NoError(t, err)
	d, err := client.Digest(exe)
	require.NoError(t, err)
	return fmt.Sprintf("mcp_servers:\n  - name: fixture\n    path: %q\n    sha256: %q\n    env: [%q]\n", exe, d, envMCPServe+"=1")
}

// growSpec is a review pair whose writer calls grow, so that the server's
// tool list changes while the pair plays, and whose reviewer then calls
// echo.
func growSpec(t *testing.T) string {
	return `version: 1
name: mcp-grow
task: Grow the tool list.
pattern: review
` + mcpFixtureYAML(t) + `workers:
  - role: writer
    provider: scripted
    max_turns: 3
    script:
      - calls:
          - name: grow
            arguments: {}
      - text: Grown.
  - role: reviewer
    provider: scripted
    max_turns: 3
    script:
      - calls:
          - name: echo
            arguments: {text: still here}
      - text: APPROVED
handoff:
  done_marker: APPROVED
limits:
  max_rounds: 1
`
}

// holdRun is a store observer that holds the run.started of role until
// release is closed, bounded.
type holdRun struct {
	next    eventlog.Observer
	role    string
	release <-chan struct{}
}

func (h *holdRun) Observe(ctx context.Context, e eventlog.Event) error {
	if e.Kind() == "run.started" && strings.Contains(string(e.Payload().AppendJSON(nil)), "/"+h.role+"/") {
		t := time.NewTimer(30 * time.Second) // a bound on a wait, not a sleep
		defer t.Stop()
		select {
		case <-h.release:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return h.next.Observe(ctx, e)
}

func TestM5_RunMakesACandidateGenerationOnListChangedAndThePairKeepsItsPlan(t *testing.T) {
	dir := t.TempDir()
	specPath := filepath.Join(dir, "grow.yaml")
	require.NoError(t, os.WriteFile(specPath, []byte(growSpec(t)), 0o600))
	db := filepath.Join(dir, "store.db")
	ws := t.TempDir()

	// The reviewer starts only once the candidate made from grow's list
	// change was activated: its run must still hold the pair's first plan.
	activated := make(chan struct{})
	var n atomic.Int32
	var out, errOut strings.Builder
	env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" },
		wrapStore: func(o eventlog.Observer) eventlog.Observer {
			return &holdRun{next: o, role: "reviewer", release: activated}
		},
		mcpEvent: func(e servers.Event) {
			if e.Kind == toolgen.EventActivated {
				if n.Add(1) == 2 {
					close(activated)
				}
			}
		}}
	code := Main(context.Background(), []string{"run", "--json", "--store", db, "--workspace", ws, specPath}, env)
	require.Equal(t, 0, code, errOut.String())
	select {
	case <-activated:
	default:
		t.Fatal("no candidate generation was activated")
	}

	var planID string
	completed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ev struct {
			Kind    string `json:"kind"`
			Payload struct {
				PlanID  string `json:"plan_id"`
				Payload struct {
					PlanID string `json:"plan_id"`
					Name   string `json:"name"`
				} `json:"payload"`
			} `json:"payload"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &ev))
		switch ev.Kind {
		case "pair.started":
			planID = ev.Payload.PlanID
		case "run.started":
			require.Equal(t, planID, ev.Payload.Payload.PlanID, "every run holds the pair's plan")
		case "tool.completed":
			completed[ev.Payload.Payload.Name] = true
		}
	}
	require.NotEmpty(t, planID)
	require.Equal(t, map[string]bool{"grow": true, "echo": true}, completed)

	// runs show names both generations of the server and the tools of
	// each: the candidate has extra, the plan the pair held does not.
	pairID := strings.TrimPrefix(planID, "plan-")
	pairID = pairID[:strings.LastIndex(pairID, "-")]
	shown, errShow, code := call(t, nil, "runs", "show", "--store", db, pairID)
	require.Equal(t, 0, code, errShow)
	require.Contains(t, shown, "mcp generations (by plan)")
	g1 := shown[strings.Index(shown, "fixture-g1"):]
	g2 := g1[strings.Index(g1, "fixture-g2"):]
	require.NotContains(t, g1[:strings.Index(g1, "fixture-g2")], "extra")
	require.Contains(t, g2[:strings.Index(g2, "mcp events")], "extra")
	require.Regexp(t, `generation\.draining\s+fixture-g1`, shown)
	require.Contains(t, shown, "server fixture  pinned")
}

// httpMCPServer serves the fixture over streamable HTTP on loopback and
// returns the mcp_servers entry that names it.
func httpMCPServer(t *testing.T) string {
	t.Helper()
	srv := newMCPFixture()
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return fmt.Sprintf("mcp_servers:\n  - name: remote\n    url: %q\n", hs.URL+"/mcp")
}

// echoSpec is a relay whose writer calls the MCP tool echo once.
func echoSpec(servers string) string {
	return `version: 1
name: mcp-echo
pattern: relay
approve: never
` + servers + `workers:
  - role: writer
    provider: scripted
    script:
      - calls: [{name: echo, arguments: {text: from afar}}]
      - text: done
  - role: reviewer
    provider: scripted
    script:
      - text: fine
`
}

func TestM1_HTTPServerIsMarkedUnpinnedInEveryEventAndRunsShow(t *testing.T) {
	dir := t.TempDir()
	specPath := filepath.Join(dir, "echo.yaml")
	require.NoError(t, os.WriteFile(specPath, []byte(echoSpec(httpMCPServer(t))), 0o600))
	db := filepath.Join(dir, "store.db")
	var mu sync.Mutex
	var last servers.Event
	var out, errOut strings.Builder
	env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" },
		mcpEvent: func(e servers.Event) { mu.Lock(); last = e; mu.Unlock() }}
	code := Main(context.Background(), []string{"run", "--store", db, "--workspace", t.TempDir(), specPath}, env)
	require.Equal(t, 0, code, errOut.String())
	pairID := out.String()[strings.Index(out.String(), "runs show ")+len("runs show "):]
	pairID = strings.Fields(pairID)[0]

	// The recorded MCP log: every event says the server is not pinned.
	st, err := openStore(context.Background(), db, false)
	require.NoError(t, err)
	recorded, err := mcplog.Read(context.Background(), st, pairID)
	require.NoError(t, st.Close())
	require.NoError(t, err)
	require.NotEmpty(t, recorded)
	for _, e := range recorded {
		if e.Kind == string(toolgen.EventActivated) {
			require.NotEmpty(t, e.Generations)
			for _, g := range e.Generations {
				require.False(t, g.Pinned, "generation %s", g.Generation)
				for _, tl := range g.Tools {
					require.False(t, tl.Pinned, tl.Name)
				}
			}
			continue
		}
		require.Equal(t, "remote", e.Server, e.Kind)
		require.False(t, e.Pinned, e.Kind)
	}
	mu.Lock()
	b, err := json.Marshal(mcplog.Payload(last))
	mu.Unlock()
	require.NoError(t, err)
	require.Contains(t, string(b), `"pinned":false`, "the field is always written")

	shown, errShow, code := call(t, nil, "runs", "show", "--store", db, pairID)
	require.Equal(t, 0, code, errShow)
	require.Contains(t, shown, "server remote  UNPINNED")
	require.Regexp(t, `echo  UNPINNED  mutating unsafe \(default\)`, shown)
	require.Contains(t, shown, "(server remote, UNPINNED)")
}
