package conformance

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/spice-orch/spice-orch/plugins/handshake"
	pluginv1 "github.com/spice-orch/spice-orch/plugins/pluginpb/v1"
	"github.com/spice-orch/spice-orch/proctree"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Case is one named conformance case.
type Case struct {
	Name        string
	Description string
	run         func(context.Context, *session) error
}

// Cases returns the suite's fixed list, in the order Run runs it.
func Cases() []Case { return slices.Clone(cases) }

// Names returns the names of Cases, in order.
func Names() []string {
	out := make([]string, len(cases))
	for i, c := range cases {
		out[i] = c.Name
	}
	return out
}

var cases = []Case{
	{"handshake/proof", "the handshake line names protocol 1 and a local endpoint; its proof verifies against the launch's secret", caseHandshake},
	{"auth/missing", "Describe, Execute and Shutdown without x-spice-plugin-auth are refused UNAUTHENTICATED", caseAuthMissing},
	{"auth/wrong", "a wrong token (another secret's, or the right one in upper case) is refused UNAUTHENTICATED; the plugin still serves", caseAuthWrong},
	{"protocol/old", "a host offering only version 0 is refused: the plugin exits without a handshake line", caseProtocolOnly("0")},
	{"protocol/new", "a host offering only version 2 is refused: the plugin exits without a handshake line", caseProtocolOnly("2")},
	{"protocol/describe", "Describe offering only version 0 or 2 fails, or names an offered version", caseProtocolDescribe},
	{"manifest", "the manifest names protocol 1 and a valid identity; every tool builds as a kernel tool.Definition; the tool profile is served", caseManifest},
	{"echo", "echo returns its text as one result for the request's call ID, then the stream ends", caseEcho},
	{"progress", "progress streams its steps for the call, then one result", caseProgress},
	{"progress/bound", "no call sends more than 1000 progress messages: progress asked for 1001 sends at most 1000, then one outcome", caseProgressBound},
	{"problem", "problem completes with a model-visible problem the kernel accepts", caseProblem},
	{"error/definitive", "fail_definitive ends with a definitive execution error the kernel accepts", caseErrorDefinitive},
	{"error/uncertain", "fail_uncertain (mutating) ends with an uncertain execution error without retry advice", caseErrorUncertain},
	{"write/confined", "write_file writes inside the plugin's directory; a path out of it is a model-visible problem", caseWriteConfined},
	{"cancel", "cancelling a slow call's stream stops the call within the cancel bound; the plugin still serves", caseCancel},
	{"deadline", "slow with timeout_millis ends by then with a definitive execution error, before the host cuts the stream off a cancellation grace later", caseDeadline},
	{"unknown-fields", "requests carrying unknown fields are served as if the fields were absent", caseUnknownFields},
	{"oversized", "a request over the manifest's max_request_bytes is refused RESOURCE_EXHAUSTED; the plugin still serves", caseOversized},
	{"shutdown/stdin-eof", "when stdin ends the plugin exits within the exit bound and leaves no process in its group", caseStdinEOF},
	{"shutdown/rpc", "Shutdown makes the plugin exit within the exit bound and leaves no process in its group", caseShutdownRPC},
}

// profile is the tool profile of doc.go: effect, replay, and a capability
// the tool must hold ("" for none).
var profile = []struct {
	name   string
	effect tool.Effect
	replay tool.Replay
	cap    tool.Capability
}{
	{"echo", tool.ReadOnly, tool.Safe, ""},
	{"progress", tool.ReadOnly, tool.Safe, ""},
	{"slow", tool.ReadOnly, tool.Safe, ""},
	{"slow_inflight", tool.ReadOnly, tool.Safe, ""},
	{"problem", tool.ReadOnly, tool.Safe, ""},
	{"fail_definitive", tool.ReadOnly, tool.Safe, ""},
	{"fail_uncertain", tool.Mutating, tool.Unsafe, ""},
	{"write_file", tool.Mutating, 0, tool.FilesystemWrite},
}

func caseHandshake(ctx context.Context, s *session) error {
	t, err := s.shared(ctx)
	if err != nil {
		return err
	}
	hs := t.Handshake()
	if hs.Version != 1 {
		return fmt.Errorf("handshake version %d, want 1", hs.Version)
	}
	if hs.Network != "unix" && hs.Network != "tcp" {
		return fmt.Errorf("handshake network %q", hs.Network)
	}
	return nil
}

func wantCode(what string, err error, want codes.Code) error {
	if got := status.Code(err); got != want {
		return fmt.Errorf("%s: status %v, want %v", what, got, want)
	}
	return nil
}

// refused checks that all three methods are refused UNAUTHENTICATED under
// ctx's metadata.
func refused(ctx context.Context, t Target, label string) error {
	c := client(t)
	_, err := c.Describe(ctx, &pluginv1.DescribeRequest{HostProtocolVersions: []uint32{1}})
	if err := wantCode(label+" Describe", err, codes.Unauthenticated); err != nil {
		return err
	}
	stream, err := c.Execute(ctx, &pluginv1.ExecuteRequest{CallId: "conformance-unauthenticated", ToolName: "echo", ArgumentsJson: []byte(`{"text":"x"}`)})
	if err == nil {
		_, err = stream.Recv()
	}
	if err := wantCode(label+" Execute", err, codes.Unauthenticated); err != nil {
		return err
	}
	_, err = c.Shutdown(ctx, &pluginv1.ShutdownRequest{GraceMillis: 1})
	return wantCode(label+" Shutdown", err, codes.Unauthenticated)
}

func caseAuthMissing(ctx context.Context, s *session) error {
	t, err := s.shared(ctx)
	if err != nil {
		return err
	}
	return refused(ctx, t, "no token:")
}

func caseAuthWrong(ctx context.Context, s *session) error {
	t, err := s.shared(ctx)
	if err != nil {
		return err
	}
	other, err := handshake.NewSecret(rand.Reader)
	if err != nil {
		return err
	}
	for label, tok := range map[string]string{"another secret's token:": other.HostAuth(), "upper-case token:": strings.ToUpper(t.AuthToken())} {
		if err := refused(metadata.AppendToOutgoingContext(ctx, AuthMetadata, tok), t, label); err != nil {
			return err
		}
	}
	if _, err := describe(ctx, t, 1); err != nil {
		return fmt.Errorf("after refused calls, an authenticated Describe: %w", err)
	}
	return nil
}

func caseProtocolOnly(offer string) func(context.Context, *session) error {
	return func(ctx context.Context, s *session) error {
		t, err := s.cfg.Launcher.Launch(ctx, LaunchConfig{Protocols: offer})
		switch {
		case err == nil:
			hs := t.Handshake()
			t.Close()
			return fmt.Errorf("the plugin served with version %d although the host offered only %s", hs.Version, offer)
		case errors.Is(err, ErrExited):
			return nil
		case errors.Is(err, ErrProtocol):
			return fmt.Errorf("detected by the host, not refused by the plugin: %w", err)
		}
		return fmt.Errorf("not refused cleanly: %w", err)
	}
}

func caseProtocolDescribe(ctx context.Context, s *session) error {
	t, err := s.shared(ctx)
	if err != nil {
		return err
	}
	for _, v := range []uint32{0, 2} {
		m, err := describe(ctx, t, v)
		if err == nil && m.GetProtocolVersion() != v {
			return fmt.Errorf("Describe offering only %d answered protocol version %d", v, m.GetProtocolVersion())
		}
		if c := status.Code(err); c == codes.Unauthenticated || c == codes.Unavailable {
			return fmt.Errorf("Describe offering only %d: %w", v, err)
		}
	}
	return nil
}

func caseManifest(ctx context.Context, s *session) error {
	t, defs, err := s.tools(ctx)
	if err != nil {
		return err
	}
	m := s.manifest
	if m.GetProtocolVersion() != 1 || m.GetProtocolVersion() != t.Handshake().Version {
		return fmt.Errorf("manifest protocol version %d, handshake %d, want 1", m.GetProtocolVersion(), t.Handshake().Version)
	}
	if err := bound.Name("manifest.plugin_name", m.GetPluginName()); err != nil {
		return err
	}
	if err := bound.Text("manifest.plugin_version", m.GetPluginVersion(), bound.MaxNameBytes); err != nil {
		return err
	}
	if err := bound.Count("manifest.tools", len(defs), bound.MaxToolsPerPlan); err != nil {
		return err
	}
	for _, p := range profile {
		d, ok := defs[p.name]
		switch {
		case !ok:
			return fmt.Errorf("the tool profile's %s is missing", p.name)
		case d.Effect() != p.effect:
			return fmt.Errorf("%s: effect %v, want %v", p.name, d.Effect(), p.effect)
		case p.replay != 0 && d.Replay() != p.replay:
			return fmt.Errorf("%s: replay %v, want %v", p.name, d.Replay(), p.replay)
		case p.cap != "" && !slices.Contains(slices.Collect(d.Capabilities()), p.cap):
			return fmt.Errorf("%s: no capability %s", p.name, p.cap)
		}
	}
	return nil
}

// outcomeOf runs one call and builds its kernel outcome.
func (s *session) outcomeOf(ctx context.Context, name, args string) (*call, tool.Result, *tool.ExecutionError, error) {
	t, defs, err := s.tools(ctx)
	if err != nil {
		return nil, tool.Result{}, nil, err
	}
	c, err := s.execute(ctx, t, name, args)
	if err != nil {
		return nil, tool.Result{}, nil, fmt.Errorf("%s: %w", name, err)
	}
	r, ee, err := kernelOutcome(defs[name], c.id, c.outcome)
	if err != nil {
		return nil, tool.Result{}, nil, fmt.Errorf("%s: the kernel refuses the outcome: %w", name, err)
	}
	return c, r, ee, nil
}

func wantResult(name string, r tool.Result, ee *tool.ExecutionError, wantProblem bool) error {
	if ee != nil {
		return fmt.Errorf("%s: an execution error (%v), want a result", name, ee.Problem())
	}
	if _, has := r.Problem(); has != wantProblem {
		return fmt.Errorf("%s: result has problem %v, want %v", name, has, wantProblem)
	}
	return nil
}

const echoText = "conformance: héllo, wörld ✓ \t \"quoted\" \\ 🙂"

func caseEcho(ctx context.Context, s *session) error {
	args, _ := json.Marshal(map[string]string{"text": echoText})
	_, r, ee, err := s.outcomeOf(ctx, "echo", string(args))
	if err != nil {
		return err
	}
	if err := wantResult("echo", r, ee, false); err != nil {
		return err
	}
	if r.Content() != echoText {
		return fmt.Errorf("echo returned %q, want %q", r.Content(), echoText)
	}
	return nil
}

func caseProgress(ctx context.Context, s *session) error {
	c, r, ee, err := s.outcomeOf(ctx, "progress", `{"count":3}`)
	if err != nil {
		return err
	}
	if err := wantResult("progress", r, ee, false); err != nil {
		return err
	}
	if len(c.progress) != 3 {
		return fmt.Errorf("%d progress messages, want 3", len(c.progress))
	}
	return nil
}

// MaxProgress is the protocol's bound of progress messages in one call
// (PROTOCOL.md); every case holds a plugin to it.
const MaxProgress = 1000

func caseProgressBound(ctx context.Context, s *session) error {
	c, _, _, err := s.outcomeOf(ctx, "progress", fmt.Sprintf(`{"count":%d}`, MaxProgress+1))
	if err != nil {
		return err
	}
	if len(c.progress) > MaxProgress {
		return fmt.Errorf("%d progress messages in one call", len(c.progress))
	}
	return nil
}

func caseProblem(ctx context.Context, s *session) error {
	_, r, ee, err := s.outcomeOf(ctx, "problem", `{}`)
	if err != nil {
		return err
	}
	return wantResult("problem", r, ee, true)
}

func caseErrorDefinitive(ctx context.Context, s *session) error {
	_, _, ee, err := s.outcomeOf(ctx, "fail_definitive", `{}`)
	if err != nil {
		return err
	}
	if ee == nil || ee.Outcome() != tool.Definitive {
		return fmt.Errorf("fail_definitive: want a definitive execution error, got %v", ee)
	}
	return nil
}

func caseErrorUncertain(ctx context.Context, s *session) error {
	_, _, ee, err := s.outcomeOf(ctx, "fail_uncertain", `{}`)
	if err != nil {
		return err
	}
	if ee == nil || ee.Outcome() != tool.Uncertain || ee.Retry() != tool.NoRetry {
		return fmt.Errorf("fail_uncertain: want an uncertain execution error without retry, got %v", ee)
	}
	return nil
}

func caseWriteConfined(ctx context.Context, s *session) error {
	_, r, ee, err := s.outcomeOf(ctx, "write_file", `{"path":"conformance/out.txt","content":"written by the conformance suite\n"}`)
	if err != nil {
		return err
	}
	if err := wantResult("write_file inside", r, ee, false); err != nil {
		return err
	}
	for _, p := range []string{"../outside.txt", "/tmp/spice-conformance-outside.txt", "conformance/../../outside.txt"} {
		args, _ := json.Marshal(map[string]string{"path": p, "content": "x"})
		_, r, ee, err := s.outcomeOf(ctx, "write_file", string(args))
		if err != nil {
			return err
		}
		if err := wantResult("write_file to "+p, r, ee, true); err != nil {
			return err
		}
	}
	return nil
}

func caseCancel(ctx context.Context, s *session) error {
	t, _, err := s.tools(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client(t).Execute(authed(cctx, t), &pluginv1.ExecuteRequest{
		CallId: "conformance-cancel", ToolName: "slow", ArgumentsJson: []byte(`{"millis":60000}`), TimeoutMillis: 60000})
	if err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return fmt.Errorf("slow: waiting for its first progress: %w", err)
	}
	if first.GetProgress().GetCallId() != "conformance-cancel" {
		return errors.New("slow: the first message is not progress for the call")
	}
	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		return fmt.Errorf("slow after cancel: %v, want Canceled", err)
	}
	wait := s.cfg.CancelBound.Milliseconds()
	_, r, ee, err := s.outcomeOf(ctx, "slow_inflight", fmt.Sprintf(`{"wait_millis":%d}`, wait))
	if err != nil {
		return err
	}
	if err := wantResult("slow_inflight", r, ee, false); err != nil {
		return err
	}
	if r.Content() != "0" {
		return fmt.Errorf("%s slow calls still run %d ms after the cancel", r.Content(), wait)
	}
	return nil
}

// deadlineMillis is the timeout_millis of the deadline case.
const deadlineMillis = 300

func caseDeadline(ctx context.Context, s *session) error {
	t, defs, err := s.tools(ctx)
	if err != nil {
		return err
	}
	// The gRPC deadline is later by the cancel bound, where the host cuts
	// the stream off (PROTOCOL.md; the Go host sends no deadline): a
	// plugin that leaves the bound to it fails here.
	cctx, cancel := context.WithTimeout(ctx, deadlineMillis*time.Millisecond+s.cfg.CancelBound)
	defer cancel()
	s.calls++
	c := &call{id: fmt.Sprintf("conformance-%d", s.calls)}
	stream, err := client(t).Execute(authed(cctx, t), &pluginv1.ExecuteRequest{
		CallId: c.id, ToolName: "slow", ArgumentsJson: []byte(`{"millis":60000}`), TimeoutMillis: deadlineMillis})
	if err == nil {
		err = readStream(stream, c)
	}
	if err != nil {
		return fmt.Errorf("slow with timeout_millis %d: no outcome within %v after it: %w", deadlineMillis, s.cfg.CancelBound, err)
	}
	_, ee, err := kernelOutcome(defs["slow"], c.id, c.outcome)
	if err != nil {
		return fmt.Errorf("slow: the kernel refuses the outcome: %w", err)
	}
	if ee == nil || ee.Outcome() != tool.Definitive {
		return fmt.Errorf("slow past its timeout_millis: want a definitive execution error, got %v", ee)
	}
	return nil
}

// withUnknown appends fields the protocol does not define, of every wire
// type, to m's encoding.
func withUnknown(m proto.Message) {
	var b []byte
	b = protowire.AppendTag(b, 1000, protowire.VarintType)
	b = protowire.AppendVarint(b, 42)
	b = protowire.AppendTag(b, 1001, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("an unknown field"))
	b = protowire.AppendTag(b, 1002, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 7)
	b = protowire.AppendTag(b, 1003, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, 9)
	m.ProtoReflect().SetUnknown(b)
}

func caseUnknownFields(ctx context.Context, s *session) error {
	t, _, err := s.tools(ctx)
	if err != nil {
		return err
	}
	dreq := &pluginv1.DescribeRequest{HostProtocolVersions: []uint32{1}}
	withUnknown(dreq)
	resp, err := client(t).Describe(authed(ctx, t), dreq)
	if err != nil {
		return fmt.Errorf("Describe with unknown fields: %w", err)
	}
	if !proto.Equal(resp.GetManifest(), s.manifest) {
		return errors.New("Describe with unknown fields returned another manifest")
	}
	s.calls++
	c := &call{id: fmt.Sprintf("conformance-%d", s.calls)}
	ereq := &pluginv1.ExecuteRequest{CallId: c.id, ToolName: "echo", ArgumentsJson: []byte(`{"text":"unknown"}`)}
	withUnknown(ereq)
	stream, err := client(t).Execute(authed(ctx, t), ereq)
	if err == nil {
		err = readStream(stream, c)
	}
	if err != nil {
		return fmt.Errorf("Execute with unknown fields: %w", err)
	}
	if got := c.outcome.GetResult().GetContent(); got != "unknown" {
		return fmt.Errorf("Execute with unknown fields returned %q", got)
	}
	return nil
}

// defaultMaxRequest is the bound the suite assumes when a manifest leaves
// max_request_bytes to the host: gRPC's default receive limit.
const defaultMaxRequest = 4 << 20

func caseOversized(ctx context.Context, s *session) error {
	t, _, err := s.tools(ctx)
	if err != nil {
		return err
	}
	limit := int(s.manifest.GetBounds().GetMaxRequestBytes())
	if limit == 0 {
		limit = defaultMaxRequest
	}
	if limit > maxCallMessage-1024 {
		return fmt.Errorf("max_request_bytes %d is more than the suite sends (%d)", limit, maxCallMessage-1024)
	}
	args, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", limit+1)})
	_, err = s.execute(ctx, t, "echo", string(args))
	if err := wantCode(fmt.Sprintf("echo of %d bytes", len(args)), err, codes.ResourceExhausted); err != nil {
		return err
	}
	if err := caseEcho(ctx, s); err != nil {
		return fmt.Errorf("after the oversized request: %w", err)
	}
	return nil
}

// exited waits for t's process to exit within the exit bound, then checks
// that its process group is empty and that none of tree, its descendants
// before it was asked to exit, still runs (a descendant that called
// setsid is in no group of the plugin's).
func (s *session) exited(t Target, tree []proctree.Proc, after string) error {
	timer := time.NewTimer(s.cfg.ExitBound)
	defer timer.Stop()
	select {
	case <-t.Done():
	case <-timer.C:
		return fmt.Errorf("the plugin still runs %v after %s", s.cfg.ExitBound, after)
	}
	if err := groupGone(t.PID()); err != nil {
		return err
	}
	if err := awaitTreeGone(tree, s.cfg.ExitBound); err != nil {
		return fmt.Errorf("after the plugin exited, %w", err)
	}
	return nil
}

func caseStdinEOF(ctx context.Context, s *session) error {
	t, err := s.cfg.Launcher.Launch(ctx, LaunchConfig{})
	if err != nil {
		return &launchError{err}
	}
	defer t.Close()
	tree := proctree.Descendants(t.PID())
	defer proctree.Kill(tree) // what the plugin left behind, the suite ends
	if err := t.CloseStdin(); err != nil {
		return err
	}
	return s.exited(t, tree, "the end of stdin")
}

func caseShutdownRPC(ctx context.Context, s *session) error {
	t, err := s.shared(ctx)
	if err != nil {
		return err
	}
	// The shared launch ends here: later cases (with Only) launch anew.
	defer func() {
		t.Close()
		s.target, s.defs, s.manifest = nil, nil, nil
	}()
	tree := proctree.Descendants(t.PID())
	defer proctree.Kill(tree) // what the plugin left behind, the suite ends
	if _, err := client(t).Shutdown(authed(ctx, t), &pluginv1.ShutdownRequest{GraceMillis: 1000}); err != nil {
		return fmt.Errorf("Shutdown: %w", err)
	}
	return s.exited(t, tree, "Shutdown")
}
