package cli

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
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/interaction"
	"github.com/spice-orch/spice-orch/mcp/client"
	"github.com/spice-orch/spice-orch/mcp/servers"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/server"
	"github.com/spice-orch/spice-orch/toolgen"
)

// serveMCP are the MCP servers that serve --mcp shares among its pairs.
type serveMCP struct {
	src       *servers.Source
	approvals *orchestrator.Approvals
	timeout   time.Duration
	seq       atomic.Uint64
}

// openServeMCP connects the mcp_servers of the spec file at path once.
// With an approval policy other than never, a candidate generation whose
// tool definitions changed waits for an operator's answer through the
// approval API, under the pair ID server.ServerQuestions, before it
// serves new pairs; no answer within timeout denies it.
func openServeMCP(ctx context.Context, path string, policy orchestrator.ApprovalPolicy, timeout time.Duration,
	approvals *orchestrator.Approvals, onEvent func(servers.Event)) (*serveMCP, error) {
	s, err := spec.DecodeFile(path)
	if err != nil {
		return nil, err
	}
	if len(s.MCPServers) == 0 {
		return nil, errors.New(path + ": the spec lists no mcp_servers")
	}
	m := &serveMCP{approvals: approvals, timeout: timeout}
	cfg := servers.Config{PlanPrefix: "mcp", OnEvent: onEvent}
	if !policy.IsNever() {
		cfg.Approve = m.approve
	}
	if m.src, err = compose.SharedMCP(ctx, s.MCPServers, cfg); err != nil {
		return nil, err
	}
	return m, nil
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
func (m *serveMCP) approve(ctx context.Context, c servers.Candidate) (bool, error) {
	args, err := json.Marshal(candidateArguments{Server: c.Server, Pinned: c.Pinned, Tools: digests(c.Tools), Active: digests(c.Active)})
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(append([]byte("spice-orch/mcp.candidate/v1\x00"), args...))
	digest := hex.EncodeToString(sum[:])
	prompt, err := json.Marshal(orchestrator.Approval{Type: orchestrator.ApprovalKind, Pair: server.ServerQuestions,
		Worker: "mcp", Tool: c.Server, Effect: "tools_changed", Replay: pinnedWord(c.Pinned),
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

// openServeMCPFlag opens the servers of --mcp; nil without the flag.
func openServeMCPFlag(ctx context.Context, f serveFlags, policy orchestrator.ApprovalPolicy,
	approvals *orchestrator.Approvals, onEvent func(servers.Event)) (*serveMCP, error) {
	if f.mcp == "" {
		return nil, nil
	}
	if f.nats != "" || f.embeddedNATS != "" {
		return nil, usageErr(errors.New("--mcp: pairs that workers play would not reach this server's MCP servers; use it without --nats"))
	}
	m, err := openServeMCP(ctx, f.mcp, policy, f.approveTimeout, approvals, onEvent)
	if err != nil {
		var ce *compose.ConfigError
		var se *spec.Error
		if errors.As(err, &ce) || errors.As(err, &se) {
			return nil, usageErr(fmt.Errorf("--mcp: %w", err))
		}
		return nil, failed(fmt.Errorf("--mcp: %w", err))
	}
	return m, nil
}

// kindPlanLeased is the MCP log event of a serve pair: the generations
// of the servers' plan it was built with.
const kindPlanLeased = "plan.leased"

// record writes the pair's MCP log: one plan.leased event naming the
// generations of its plan, each marked pinned or not. A failure loses
// only that record.
func (m *serveMCP) record(ctx context.Context, st eventlog.Observer, pairID string, p *compose.Pair) error {
	gens, ok := p.MCPPlan(p.Plan.ID)
	if !ok {
		return nil
	}
	r, err := newMCPRecorder(pairID, st, time.Now, 0)
	if err != nil {
		return err
	}
	r.onEvent(servers.Event{Event: toolgen.Event{Kind: kindPlanLeased, Plan: p.Plan.ID}, Generations: gens})
	return errors.Join(r.flush(ctx), r.close(ctx))
}

func (m *serveMCP) source() *servers.Source {
	if m == nil {
		return nil
	}
	return m.src
}

func (m *serveMCP) close() {
	if m != nil {
		_ = m.src.Close()
	}
}
