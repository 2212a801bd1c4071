package serve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/compose"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/interaction"
	"github.com/spice-orch/spice-orch/mcp/client"
	"github.com/spice-orch/spice-orch/mcp/servers"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/server"
)

// sharedMCP are the MCP servers that serve --mcp shares among its pairs.
type sharedMCP struct {
	src       *servers.Source
	approvals *orchestrator.Approvals
	timeout   time.Duration
	seq       atomic.Uint64
}

// openMCP connects the mcp_servers of the spec file at path once. With
// an approval policy other than never, a candidate generation whose tool
// definitions changed waits for an operator's answer through the
// approval API, under the pair ID server.OwnQuestions, before it
// serves new pairs; no answer within timeout denies it. A spec it cannot
// use is a *ConfigError.
func openMCP(ctx context.Context, path string, policy orchestrator.ApprovalPolicy, timeout time.Duration,
	approvals *orchestrator.Approvals, onEvent func(servers.Event)) (*sharedMCP, error) {
	s, err := spec.DecodeFile(path)
	if err != nil {
		return nil, mcpErr(err)
	}
	if len(s.MCPServers) == 0 {
		return nil, errors.New("--mcp: " + path + ": the spec lists no mcp_servers")
	}
	m := &sharedMCP{approvals: approvals, timeout: timeout}
	cfg := servers.Config{PlanPrefix: "mcp", OnEvent: onEvent}
	if !policy.IsNever() {
		cfg.Approve = m.approve
	}
	if m.src, err = compose.SharedMCP(ctx, s.MCPServers, cfg); err != nil {
		return nil, mcpErr(err)
	}
	return m, nil
}

// mcpErr is err of --mcp: bad usage when the spec is at fault.
func mcpErr(err error) error {
	var ce *compose.ConfigError
	var se *spec.Error
	if errors.As(err, &ce) || errors.As(err, &se) {
		return usage(fmt.Errorf("--mcp: %w", err))
	}
	return fmt.Errorf("--mcp: %w", err)
}

// candidateArguments is what an operator is asked to approve: the
// server, whether its code is pinned, and each tool's definition digest
// now and before.
type candidateArguments struct {
	Server string            `json:"server"`
	Pinned bool              `json:"pinned"`
	Tools  map[string]string `json:"tools"`
	Active map[string]string `json:"active"`
}

func digests(infos []client.Info) map[string]string {
	out := make(map[string]string, len(infos))
	for _, in := range infos {
		out[in.Name] = in.Digest
	}
	return out
}

// approve asks the operator about candidate c through the approvals
// broker: an approval question whose tool is the server and whose
// arguments are the definitions' digests.
func (m *sharedMCP) approve(ctx context.Context, c servers.Candidate) (bool, error) {
	args, err := json.Marshal(candidateArguments{Server: c.Server, Pinned: c.Pinned, Tools: digests(c.Tools), Active: digests(c.Active)})
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(append([]byte("spice-orch/mcp.candidate/v1\x00"), args...))
	digest := hex.EncodeToString(sum[:])
	// Replay carries the word runs show marks the server's code with.
	replay := "pinned"
	if !c.Pinned {
		replay = "UNPINNED"
	}
	prompt, err := json.Marshal(orchestrator.Approval{Type: orchestrator.ApprovalKind, Pair: server.OwnQuestions,
		Worker: "mcp", Tool: c.Server, Effect: "tools_changed", Replay: replay,
		Arguments: args, ArgumentsBytes: len(args), Digest: digest})
	if err != nil {
		return false, err
	}
	qid := id.Interaction("mcp-candidate-" + strconv.FormatUint(m.seq.Add(1), 10))
	q, err := interaction.NewQuestion(qid, string(prompt),
		orchestrator.ApprovalAnswer(digest, true), orchestrator.ApprovalAnswer(digest, false))
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	a, err := m.approvals.Ask(ctx, q)
	if errors.Is(err, context.DeadlineExceeded) {
		return false, errors.New("no answer within " + m.timeout.String())
	}
	if err != nil {
		return false, err
	}
	return a.Text() == orchestrator.ApprovalAnswer(digest, true), nil
}

// source is nil without --mcp.
func (m *sharedMCP) source() *servers.Source {
	if m == nil {
		return nil
	}
	return m.src
}

func (m *sharedMCP) close() {
	if m != nil {
		_ = m.src.Close()
	}
}
