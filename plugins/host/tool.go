package host

import (
	"context"
	"errors"
	"io"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/spice-orch/spice-orch/idempotency"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/plugins/handshake"
	pb "github.com/spice-orch/spice-orch/plugins/pluginpb/v1"
)

// Problem codes of the execution errors the host makes.
const (
	CodeUnavailable       = "plugin_unavailable"        // definitive: the plugin was not running or closing; nothing was sent
	CodeRequestTooLarge   = "plugin_request_too_large"  // definitive: the call exceeds the request bound; nothing was sent
	CodeUnauthenticated   = "plugin_unauthenticated"    // definitive: the plugin refused the host's proof before reading
	CodeFailed            = "plugin_failed"             // the process crashed or the connection broke after the request was sent
	CodeTimeout           = "plugin_call_timeout"       // the call exceeded its time bound
	CodeCanceled          = "canceled"                  // the run was cancelled while the call ran
	CodeProtocolViolation = "plugin_protocol_violation" // the plugin broke plugin/v1: wrong call ID, two outcomes, oversized message...
	CodeStopped           = "plugin_stopped"            // the host stopped the plugin by force while the call ran
)

// Tool is one tool of a plugin: an ordinary kernel tool.Tool whose calls go
// to the plugin process.
type Tool struct {
	p   *Plugin
	def tool.Definition
}

var _ tool.Tool = (*Tool)(nil)

// Definition returns the verified definition from the manifest.
func (t *Tool) Definition() tool.Definition { return t.def }

// Plugin returns the plugin that serves the tool.
func (t *Tool) Plugin() *Plugin { return t.p }

// requestOverhead is a generous bound of an ExecuteRequest's bytes beside
// its arguments.
const requestOverhead = 512

// Execute sends the call to the plugin and returns its one outcome, or the
// kernel's typed failure (see the package doc).
func (t *Tool) Execute(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
	p := t.p
	args := call.Arguments()
	b := p.manifest.Bounds
	if len(args)+len(call.Name())+len(call.ID())+requestOverhead > b.MaxRequestBytes {
		return tool.Result{}, tool.Fail(call.ID(), problemTooLarge)
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return tool.Result{}, tool.Canceled(call.ID(), ctx.Err())
	case <-p.closing:
		return tool.Result{}, tool.Fail(call.ID(), problemUnavailable)
	case <-p.exited:
		return tool.Result{}, tool.Fail(call.ID(), problemUnavailable)
	}
	defer func() { <-p.slots }()
	if !p.beginCall() {
		return tool.Result{}, tool.Fail(call.ID(), problemUnavailable)
	}
	defer p.endCall()
	// The plugin is told CallTimeout (timeout_millis) and may report its
	// own deadline; the host cuts the stream off CancelGrace later.
	cctx, cancel := context.WithTimeout(ctx, b.CallTimeout+p.cfg.CancelGrace)
	defer cancel()
	stop := context.AfterFunc(p.forced, cancel)
	defer stop()
	c := &callState{t: t, ctx: ctx, cctx: cctx, call: call}
	sctx := cctx
	if k, ok := idempotency.FromContext(ctx); ok {
		// Metadata, as the protobuf messages are frozen (PROTOCOL.md).
		sctx = metadata.AppendToOutgoingContext(sctx, handshake.IdempotencyMetadata, k.String())
	}
	stream, err := p.conn.NewStream(noDeadline{sctx}, &pb.PluginService_ServiceDesc.Streams[0], pb.PluginService_Execute_FullMethodName, p.callOpts...)
	if err != nil {
		// Nothing left the host.
		if ctx.Err() != nil {
			return tool.Result{}, tool.Canceled(call.ID(), ctx.Err())
		}
		return tool.Result{}, tool.Fail(call.ID(), problemUnavailable)
	}
	req := &pb.ExecuteRequest{
		CallId: string(call.ID()), ToolName: call.Name(), ArgumentsJson: args,
		TimeoutMillis: uint64(b.CallTimeout / time.Millisecond),
	}
	if err := stream.SendMsg(req); err != nil {
		return c.broken(stream.RecvMsg(new(pb.ExecuteResponse)))
	}
	if err := stream.CloseSend(); err != nil {
		return c.broken(err)
	}
	var resp pb.ExecuteResponse
	for {
		// A slow consumer of progress must not stretch the call: its
		// bound is checked between messages, not only while waiting.
		if cctx.Err() != nil {
			return c.broken(cctx.Err())
		}
		resp.Reset()
		if err := stream.RecvMsg(&resp); err != nil {
			if err == io.EOF {
				return c.violation("the stream ended without an outcome")
			}
			return c.broken(err)
		}
		switch ev := resp.GetEvent().(type) {
		case *pb.ExecuteResponse_Progress:
			if ev.Progress.GetCallId() != string(call.ID()) {
				return c.violation("progress for another call")
			}
			pr, err := tool.NewProgress(call.ID(), ev.Progress.GetMessage())
			if err != nil {
				return c.violation("invalid progress")
			}
			// Progress shows that the plugin read the request.
			c.progress++
			if c.progress > p.cfg.MaxProgress {
				return c.violation("more than " + strconv.Itoa(p.cfg.MaxProgress) + " progress messages")
			}
			if r != nil {
				_ = r.Report(cctx, pr)
			}
		case *pb.ExecuteResponse_Outcome:
			res, err := c.outcome(ev.Outcome)
			// Exactly one outcome, then the end of the stream.
			if end := stream.RecvMsg(&resp); end != io.EOF {
				if end == nil {
					return c.violation("a message after the outcome")
				}
				return c.broken(end)
			}
			return res, err
		default:
			return c.violation("an empty response")
		}
	}
}

// noDeadline hides the call's deadline from gRPC, which would send it as
// grpc-timeout: the host ends the stream at the call's bound itself
// (PROTOCOL.md), and grpc-go arms two timers per call on the plugin's side
// for a deadline it is sent, each of which can wake an idle thread there.
type noDeadline struct{ context.Context }

func (noDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }

type callState struct {
	t         *Tool
	ctx, cctx context.Context
	call      tool.Call
	progress  int // progress messages received
}

func (c *callState) mutating() bool { return c.t.def.Effect() == tool.Mutating }

// fail ends the call with p: uncertain for a mutating tool (the request
// was sent), definitive for a read-only one.
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

func (c *callState) violation(reason string) (tool.Result, error) {
	p, err := problem.New(CodeProtocolViolation, reason)
	if err != nil {
		p = problemViolation
	}
	return c.fail(p, errProtocol)
}

// errProtocol is the cause of a protocol violation.
var errProtocol = errors.New("plugin protocol violation")

// broken maps a stream error after the request may have left the host.
func (c *callState) broken(err error) (tool.Result, error) {
	p := c.t.p
	switch {
	case c.ctx.Err() != nil:
		if c.mutating() {
			return tool.Result{}, tool.FailUncertain(c.call.ID(), problemCanceledSent, c.ctx.Err())
		}
		return tool.Result{}, tool.Canceled(c.call.ID(), c.ctx.Err())
	case p.forced.Err() != nil:
		return c.fail(problemStopped, err)
	case errors.Is(c.cctx.Err(), context.DeadlineExceeded):
		return c.fail(problemTimeout, err)
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded:
		// The plugin's side saw the deadline first.
		return c.fail(problemTimeout, err)
	case codes.Unauthenticated:
		if c.progress > 0 {
			// It read the request before it refused: the call may have
			// taken effect.
			return c.fail(problemUnauthenticatedRead, err)
		}
		return tool.Result{}, tool.Fail(c.call.ID(), problemUnauthenticated)
	case codes.ResourceExhausted:
		return c.violation("a message exceeds the size bound")
	}
	return c.fail(problemFailed, err)
}

// outcome maps the plugin's one outcome to the kernel's.
func (c *callState) outcome(o *pb.Outcome) (tool.Result, error) {
	if o.GetCallId() != string(c.call.ID()) {
		return c.violation("an outcome for another call")
	}
	switch v := o.GetOutcome().(type) {
	case *pb.Outcome_Result:
		content := v.Result.GetContent()
		if pp := v.Result.GetProblem(); pp != nil {
			prob, err := problem.New(pp.GetCode(), pp.GetMessage())
			if err != nil {
				return c.violation("an invalid problem")
			}
			res, err := tool.NewProblemResult(c.call.ID(), prob, content)
			if err != nil {
				return c.violation("an invalid result")
			}
			return res, nil
		}
		res, err := tool.NewResult(c.call.ID(), content)
		if err != nil {
			return c.violation("an invalid result")
		}
		return res, nil
	case *pb.Outcome_Error:
		return c.executionError(v.Error)
	}
	return c.violation("an outcome with neither result nor error")
}

func (c *callState) executionError(e *pb.ExecutionError) (tool.Result, error) {
	cfg := tool.ExecutionErrorConfig{CallID: c.call.ID()}
	switch e.GetCertainty() {
	case pb.Certainty_CERTAINTY_DEFINITIVE:
		cfg.Outcome = tool.Definitive
	case pb.Certainty_CERTAINTY_UNCERTAIN:
		if !c.mutating() {
			return c.violation("an uncertain outcome from a read-only tool")
		}
		cfg.Outcome = tool.Uncertain
	default:
		return c.violation("an error without certainty")
	}
	switch e.GetRetryAdvice() {
	case pb.RetryAdvice_RETRY_ADVICE_NEVER, pb.RetryAdvice_RETRY_ADVICE_UNSPECIFIED:
		cfg.Retry = tool.NoRetry
		if e.GetRetryAfterMillis() != 0 {
			return c.violation("a retry delay without retry advice")
		}
	case pb.RetryAdvice_RETRY_ADVICE_ALLOWED:
		if c.t.def.Replay() == tool.Unsafe {
			return c.violation("retry advice for a replay-unsafe tool")
		}
		cfg.Retry = tool.RetryAllowed
		if ms := e.GetRetryAfterMillis(); ms > uint64(tool.MaxRetryAfter/time.Millisecond) {
			return c.violation("a retry delay over the bound")
		} else {
			cfg.RetryAfter = time.Duration(ms) * time.Millisecond
		}
	default:
		return c.violation("unknown retry advice")
	}
	prob, err := problem.New(e.GetProblem().GetCode(), e.GetProblem().GetMessage())
	if err != nil {
		return c.violation("an error with an invalid problem")
	}
	cfg.Problem = prob
	ee, err := tool.NewExecutionError(cfg)
	if err != nil {
		return c.violation("an inconsistent execution error")
	}
	return tool.Result{}, ee
}

var (
	problemUnavailable         = problem.Must(CodeUnavailable, "the plugin is not running; the call was not sent")
	problemTooLarge            = problem.Must(CodeRequestTooLarge, "the call exceeds the plugin's request bound; it was not sent")
	problemUnauthenticated     = problem.Must(CodeUnauthenticated, "the plugin refused the host's authentication; the call did not run")
	problemUnauthenticatedRead = problem.Must(CodeUnauthenticated, "the plugin refused the host's authentication after it reported progress on the call; it may have taken effect")
	problemFailed              = problem.Must(CodeFailed, "the plugin process or its connection failed during the call")
	problemTimeout             = problem.Must(CodeTimeout, "the call exceeded its time bound")
	problemCanceledSent        = problem.Must(CodeCanceled, "the run was cancelled after the call reached the plugin; it may have taken effect")
	problemViolation           = problem.Must(CodeProtocolViolation, "the plugin broke the protocol")
	problemStopped             = problem.Must(CodeStopped, "the host stopped the plugin by force while the call ran")
)

// keep id imported for callers' conversions.
var _ id.Call
