package client

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spice-orch/spice-orch/idempotency"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Problem codes of the outcomes the client makes.
const (
	CodeUnavailable     = "mcp_unavailable"       // definitive: the server was not running or closing; nothing was sent
	CodeRequestTooLarge = "mcp_request_too_large" // definitive: the call exceeds the message bound; nothing was sent
	CodeRefused         = "mcp_refused"           // definitive: the server answered the request with a JSON-RPC error
	CodeFailed          = "mcp_failed"            // the process or connection failed after the request was sent
	CodeTimeout         = "mcp_call_timeout"      // the call exceeded its time bound
	CodeCanceled        = "canceled"              // the run was cancelled after the request was sent
	CodeResultTooLarge  = "mcp_result_too_large"  // the result exceeds the result bound
	CodeToolError       = "mcp_tool_error"        // the tool reported isError: a model-visible problem
)

// MetaIdempotencyKey is the _meta key of a tools/call request that
// carries the call's idempotency key, when the run has one: the same for
// every delivery of the call, so a server can refuse to apply it twice.
const MetaIdempotencyKey = "spice-orch/idempotency-key"

// Tool is one tool of an MCP server: an ordinary kernel tool.Tool whose
// calls become tools/call requests.
type Tool struct {
	s    *Server
	def  tool.Definition
	info Info
}

var _ tool.Tool = (*Tool)(nil)

// Definition returns the verified kernel definition.
func (t *Tool) Definition() tool.Definition { return t.def }

// Info says what the server listed and where the effect came from.
func (t *Tool) Info() Info { return t.info }

// requestOverhead is a generous bound of a tools/call message beside its
// arguments and name.
const requestOverhead = 256

// Execute sends the call and returns its one outcome, or the kernel's
// typed failure (see the package doc).
func (t *Tool) Execute(ctx context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
	s := t.s
	args := call.Arguments()
	if len(args)+len(call.Name())+requestOverhead > s.cfg.MaxMessageBytes {
		return tool.Result{}, tool.Fail(call.ID(), problemTooLarge)
	}
	select {
	case <-s.closing:
		return tool.Result{}, tool.Fail(call.ID(), problemUnavailable)
	default:
	}
	if s.dead() {
		return tool.Result{}, tool.Fail(call.ID(), problemUnavailable)
	}
	if err := ctx.Err(); err != nil {
		return tool.Result{}, tool.Canceled(call.ID(), err)
	}
	// The call also ends when the server process exits: its stdout can
	// outlive it in a descendant, and the SDK would wait for the bound.
	lctx, endCall := context.WithCancelCause(ctx)
	defer endCall(nil)
	if s.life != nil {
		stop := context.AfterFunc(s.life, func() { endCall(context.Cause(s.life)) })
		defer stop()
	}
	cctx, cancel := context.WithTimeout(lctx, s.cfg.CallTimeout)
	defer cancel()
	var arguments any = json.RawMessage(args)
	if len(args) == 0 {
		arguments = map[string]any{}
	}
	params := &sdk.CallToolParams{Name: call.Name(), Arguments: arguments}
	if k, ok := idempotency.FromContext(ctx); ok {
		params.Meta = sdk.Meta{MetaIdempotencyKey: k.String()}
	}
	res, err := s.session.CallTool(cctx, params)
	c := callState{t: t, ctx: ctx, cctx: cctx, call: call}
	if err != nil {
		return c.broken(err)
	}
	return c.result(res)
}

type callState struct {
	t         *Tool
	ctx, cctx context.Context
	call      tool.Call
}

func (c *callState) mutating() bool { return c.t.def.Effect() == tool.Mutating }

// fail ends the call with p after the request was sent: uncertain for a
// mutating tool, definitive for a read-only one.
func (c *callState) fail(p problem.Problem, cause error) (tool.Result, error) {
	if c.mutating() {
		return tool.Result{}, tool.FailUncertain(c.call.ID(), p, cause)
	}
	ee, err := tool.NewExecutionError(tool.ExecutionErrorConfig{CallID: c.call.ID(), Outcome: tool.Definitive, Problem: p, Cause: cause})
	if err != nil {
		return tool.Result{}, err
	}
	return tool.Result{}, ee
}

// broken maps an error of CallTool.
func (c *callState) broken(err error) (tool.Result, error) {
	var rpc *jsonrpc.Error
	switch {
	case c.ctx.Err() != nil:
		if c.mutating() {
			return tool.Result{}, tool.FailUncertain(c.call.ID(), problemCanceledSent, c.ctx.Err())
		}
		return tool.Result{}, tool.Canceled(c.call.ID(), c.ctx.Err())
	case errors.Is(c.cctx.Err(), context.DeadlineExceeded):
		return c.fail(problemTimeout, err)
	case errors.As(err, &rpc):
		// The server answered: it refused the request (unknown tool,
		// invalid arguments) instead of running it.
		p, perr := problem.New(CodeRefused, boundedText(rpc.Message, 512))
		if perr != nil {
			p = problemRefused
		}
		return tool.Result{}, tool.Fail(c.call.ID(), p)
	case errors.Is(context.Cause(c.cctx), errExited):
		return c.fail(problemFailed, errExited)
	}
	return c.fail(problemFailed, errFailed)
}

// errFailed is the cause of a transport or process failure; the SDK's own
// error may quote the peer and is not kept.
var errFailed = errors.New("mcp server or connection failed")

// errExited is the cause of a call that ended because the server process
// exited.
var errExited = errors.New("mcp server process exited")

// result maps the server's result: its text, and isError as a
// model-visible problem.
func (c *callState) result(res *sdk.CallToolResult) (tool.Result, error) {
	max := c.t.s.cfg.MaxResultBytes
	var b strings.Builder
	for i, item := range res.Content {
		if i > 0 {
			b.WriteByte('\n')
		}
		if tc, ok := item.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		} else if j, err := json.Marshal(item); err == nil {
			b.Write(j)
		}
		if b.Len() > max {
			return c.fail(problemResultTooLarge, errResultTooLarge)
		}
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		j, err := json.Marshal(res.StructuredContent)
		if err == nil {
			b.Write(j)
		}
	}
	text := b.String()
	if len(text) > max {
		return c.fail(problemResultTooLarge, errResultTooLarge)
	}
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	if res.IsError {
		p, err := problem.New(CodeToolError, boundedText(firstLine(text), 512))
		if err != nil {
			p = problemToolError
		}
		out, err := tool.NewProblemResult(c.call.ID(), p, text)
		if err != nil {
			return c.fail(problemResultTooLarge, err)
		}
		return out, nil
	}
	out, err := tool.NewResult(c.call.ID(), text)
	if err != nil {
		return c.fail(problemResultTooLarge, err)
	}
	return out, nil
}

var errResultTooLarge = errors.New("mcp result exceeds max_result_bytes")

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return "the tool reported an error"
	}
	return s
}

// boundedText cuts s to at most n bytes on a rune boundary.
func boundedText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

var (
	problemUnavailable    = problem.Must(CodeUnavailable, "the MCP server is not running; the call was not sent")
	problemTooLarge       = problem.Must(CodeRequestTooLarge, "the call exceeds the message bound; it was not sent")
	problemRefused        = problem.Must(CodeRefused, "the MCP server refused the request")
	problemFailed         = problem.Must(CodeFailed, "the MCP server process or its connection failed during the call")
	problemTimeout        = problem.Must(CodeTimeout, "the call exceeded its time bound")
	problemCanceledSent   = problem.Must(CodeCanceled, "the run was cancelled after the call reached the MCP server; it may have taken effect")
	problemResultTooLarge = problem.Must(CodeResultTooLarge, "the MCP result exceeds the result bound")
	problemToolError      = problem.Must(CodeToolError, "the tool reported an error")
)
