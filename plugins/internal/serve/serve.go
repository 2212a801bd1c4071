package serve

import (
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/spice-orch/spice-orch/idempotency"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/plugins/handshake"
	pb "github.com/spice-orch/spice-orch/plugins/pluginpb/v1"
)

// Defaults of Options.
const (
	DefaultMaxMessageBytes = 4 << 20
	DefaultShutdownGrace   = 5 * time.Second
	// SocketName is the socket's name inside the private directory.
	SocketName = "plugin.sock"
)

// Options configure one plugin process.
type Options struct {
	Name, Version string
	Tools         []tool.Tool
	// Bounds are advertised in the manifest (zero: the host's).
	MaxRequestBytes, MaxResponseBytes, MaxConcurrentCalls uint32
	MaxCallMillis                                         uint64
	// MaxMessageBytes bounds gRPC messages both ways; default
	// DefaultMaxMessageBytes.
	MaxMessageBytes int

	Stdin  io.Reader
	Stdout io.Writer
	Getenv func(string) string

	Faults Faults
}

// Faults break the protocol on purpose, for the host's tests. The zero
// value is a correct plugin.
type Faults struct {
	// LineVersion replaces the version of the handshake line.
	LineVersion uint32
	// WrongProof proves a different secret.
	WrongProof bool
	// HangBeforeLine never prints the handshake line.
	HangBeforeLine bool
	// Manifest edits the manifest before it is sent.
	Manifest func(*pb.Manifest)
	// Responses replaces the responses of a call before they are sent.
	Responses func(req *pb.ExecuteRequest, rs []*pb.ExecuteResponse) []*pb.ExecuteResponse
	// NoAuth serves calls without checking their token.
	NoAuth bool
	// AnyProtocol serves protocol 1 whatever versions the host offers, at
	// launch and in Describe.
	AnyProtocol bool
	// EndWith, when set and returning an error, ends a call's stream
	// with that status after the responses, instead of with OK.
	EndWith func(req *pb.ExecuteRequest) error
}

// ErrNoSecret: stdin did not carry a valid secret line.
var ErrNoSecret = errors.New("plugin: no valid secret on stdin")

// ErrNoProtocol: the host speaks no protocol version this plugin does.
var ErrNoProtocol = errors.New("plugin: no common protocol version")

// Run serves until the host closes stdin, asks for Shutdown, or ctx ends.
func Run(ctx context.Context, o Options) error {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: o.Tools})
	if err != nil {
		return err
	}
	in := bufio.NewReaderSize(o.Stdin, 128)
	line, err := in.ReadSlice('\n')
	if err != nil {
		return ErrNoSecret
	}
	secret, err := handshake.ParseSecret(strings.TrimSuffix(string(line), "\n"))
	if err != nil {
		return ErrNoSecret
	}
	vs, err := handshake.ParseVersions(o.Getenv(handshake.EnvProtocols))
	if (err != nil || !slices.Contains(vs, handshake.Version)) && !o.Faults.AnyProtocol {
		return ErrNoProtocol
	}
	dir := o.Getenv(handshake.EnvDir)
	if dir == "" || !filepath.IsAbs(dir) {
		return errors.New("plugin: " + handshake.EnvDir + " is not an absolute directory")
	}
	sock := filepath.Join(dir, SocketName)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	s := &server{o: o, d: d, hostAuth: []byte(secret.HostAuth()), stop: make(chan time.Duration, 1)}
	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(o.MaxMessageBytes), grpc.MaxSendMsgSize(o.MaxMessageBytes),
		grpc.UnaryInterceptor(s.unaryAuth), grpc.StreamInterceptor(s.streamAuth),
		// A local connection needs neither BDP pings nor a goroutine per
		// stream.
		grpc.InitialWindowSize(4<<20), grpc.InitialConnWindowSize(4<<20),
		grpc.SharedWriteBuffer(true), grpc.NumStreamWorkers(4),
	)
	pb.RegisterPluginServiceServer(gs, s)

	eofc := make(chan struct{})
	go func() {
		// stdin stays open while the host lives; EOF means it is gone.
		_, _ = io.Copy(io.Discard, in)
		close(eofc)
	}()
	if o.Faults.HangBeforeLine {
		<-eofc
		_ = lis.Close()
		return errors.New("plugin: hung at the handshake on purpose")
	}
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()

	hl := handshake.NewLine(secret, handshake.Version, handshake.NetworkUnix, sock)
	if o.Faults.WrongProof {
		other, _ := handshake.ParseSecret(strings.Repeat("0", 64))
		hl.Proof = other.PluginProof(hl.Network, hl.Address)
	}
	if o.Faults.LineVersion != 0 {
		hl.Version = o.Faults.LineVersion
	}
	if _, err := io.WriteString(o.Stdout, hl.Format()+"\n"); err != nil {
		gs.Stop()
		<-served
		return err
	}
	grace := DefaultShutdownGrace
	select {
	case <-ctx.Done():
	case <-eofc:
	case grace = <-s.stop:
	case err := <-served:
		return err
	}
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		gs.Stop()
		<-stopped
	}
	<-served
	return nil
}

type server struct {
	pb.UnimplementedPluginServiceServer
	o        Options
	d        *tool.Canonical
	hostAuth []byte // the host's proof of the secret, the same on every call
	stop     chan time.Duration
	once     sync.Once
}

func (s *server) authorized(ctx context.Context) error {
	if s.o.Faults.NoAuth {
		return nil
	}
	v := metadata.ValueFromIncomingContext(ctx, handshake.AuthMetadata)
	if len(v) != 1 || subtle.ConstantTimeCompare([]byte(v[0]), s.hostAuth) != 1 {
		return status.Error(codes.Unauthenticated, "missing or wrong "+handshake.AuthMetadata)
	}
	return nil
}

func (s *server) unaryAuth(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.authorized(ctx); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *server) streamAuth(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := s.authorized(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}

func (s *server) Describe(_ context.Context, req *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	if !slices.Contains(req.GetHostProtocolVersions(), handshake.Version) && !s.o.Faults.AnyProtocol {
		// PROTOCOL.md: a manifest of a version the host did not offer
		// would be one it cannot read.
		return nil, status.Error(codes.FailedPrecondition, "no common protocol version: this plugin speaks 1")
	}
	m := &pb.Manifest{
		ProtocolVersion: handshake.Version,
		PluginName:      s.o.Name,
		PluginVersion:   s.o.Version,
		Bounds: &pb.Bounds{
			MaxRequestBytes: s.o.MaxRequestBytes, MaxResponseBytes: s.o.MaxResponseBytes,
			MaxConcurrentCalls: s.o.MaxConcurrentCalls, MaxCallMillis: s.o.MaxCallMillis,
		},
	}
	for def := range s.d.Definitions() {
		m.Tools = append(m.Tools, ToolDefinition(def))
	}
	if s.o.Faults.Manifest != nil {
		s.o.Faults.Manifest(m)
	}
	return &pb.DescribeResponse{Manifest: m}, nil
}

func (s *server) Shutdown(_ context.Context, req *pb.ShutdownRequest) (*pb.ShutdownResponse, error) {
	grace := time.Duration(min(req.GetGraceMillis(), uint64(time.Hour/time.Millisecond))) * time.Millisecond
	s.once.Do(func() { s.stop <- grace })
	return &pb.ShutdownResponse{}, nil
}

// ToolDefinition is the manifest form of a kernel definition.
func ToolDefinition(def tool.Definition) *pb.ToolDefinition {
	t := &pb.ToolDefinition{
		Name: def.Name(), Description: def.Description(), InputSchemaJson: def.SchemaString(),
		Effect: pb.Effect_EFFECT_READ_ONLY, ReplaySafety: pb.ReplaySafety(def.Replay()),
	}
	if def.Effect() == tool.Mutating {
		t.Effect = pb.Effect_EFFECT_MUTATING
	}
	for c := range def.Capabilities() {
		t.Capabilities = append(t.Capabilities, string(c))
	}
	return t
}

func (s *server) Execute(req *pb.ExecuteRequest, stream grpc.ServerStreamingServer[pb.ExecuteResponse]) error {
	e := &execution{stream: stream, hold: s.o.Faults.Responses != nil}
	out := s.execute(stream.Context(), req, e)
	if err := e.send(&pb.ExecuteResponse{Event: &pb.ExecuteResponse_Outcome{Outcome: out}}); err != nil {
		return err
	}
	if e.hold {
		e.mu.Lock() // a tool's goroutine may still be reporting
		held := e.held
		e.held = nil
		e.mu.Unlock()
		for _, r := range s.o.Faults.Responses(req, held) {
			if err := stream.Send(r); err != nil {
				return err
			}
		}
	}
	if f := s.o.Faults.EndWith; f != nil {
		return f(req)
	}
	return nil
}

// execution is one Execute's stream and the tool's reporter on it.
type execution struct {
	mu     sync.Mutex // a tool may report from several goroutines
	stream grpc.ServerStreamingServer[pb.ExecuteResponse]
	hold   bool // Faults.Responses rewrites the responses: keep them until the end
	held   []*pb.ExecuteResponse
}

func (e *execution) send(r *pb.ExecuteResponse) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hold {
		e.held = append(e.held, r)
		return nil
	}
	return e.stream.Send(r)
}

// Report sends p as a progress message.
func (e *execution) Report(_ context.Context, p tool.Progress) error {
	return e.send(&pb.ExecuteResponse{Event: &pb.ExecuteResponse_Progress{Progress: &pb.Progress{CallId: string(p.CallID()), Message: p.Message()}}})
}

func (s *server) execute(ctx context.Context, req *pb.ExecuteRequest, r tool.Reporter) *pb.Outcome {
	out := &pb.Outcome{CallId: req.GetCallId()}
	call, err := tool.NewCall(id.Call(req.GetCallId()), req.GetToolName(), req.GetArgumentsJson())
	if err != nil {
		var be *bound.Error
		code := "invalid_call"
		if errors.As(err, &be) && be.Field == "tool_call.arguments" {
			code = "invalid_arguments"
		}
		out.Outcome = &pb.Outcome_Error{Error: &pb.ExecutionError{
			Certainty: pb.Certainty_CERTAINTY_DEFINITIVE, RetryAdvice: pb.RetryAdvice_RETRY_ADVICE_NEVER,
			Problem: &pb.Problem{Code: code, Message: "the call was refused before it ran"}}}
		return out
	}
	if ms := req.GetTimeoutMillis(); ms > 0 && ms < uint64(24*time.Hour/time.Millisecond) {
		// The host cuts the stream off a cancellation grace later, so
		// that the tool can report the deadline itself.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
		defer cancel()
	}
	// The host's idempotency key reaches the tool as a compiled tool
	// gets it; a malformed one is dropped, not trusted.
	if v := metadata.ValueFromIncomingContext(ctx, handshake.IdempotencyMetadata); len(v) == 1 {
		if k, err := idempotency.Parse(v[0]); err == nil {
			ctx = idempotency.WithKey(ctx, k)
		}
	}
	res, err := s.d.Dispatch(ctx, call, r)
	if err == nil {
		tr := &pb.ToolResult{Content: res.Content()}
		if p, ok := res.Problem(); ok {
			tr.Problem = &pb.Problem{Code: p.Code(), Message: p.Message()}
		}
		out.Outcome = &pb.Outcome_Result{Result: tr}
		return out
	}
	out.Outcome = &pb.Outcome_Error{Error: ExecutionError(err)}
	return out
}

// ExecutionError is the wire form of a dispatcher's error.
func ExecutionError(err error) *pb.ExecutionError {
	var ee *tool.ExecutionError
	var df *tool.DispatchFailure
	switch {
	case errors.As(err, &df) && df.Execution() != nil:
		ee = df.Execution()
	case errors.As(err, &ee):
	default:
		code := "invalid_call"
		if errors.Is(err, tool.ErrUnknownTool) {
			code = "unknown_tool"
		}
		return &pb.ExecutionError{Certainty: pb.Certainty_CERTAINTY_DEFINITIVE, RetryAdvice: pb.RetryAdvice_RETRY_ADVICE_NEVER,
			Problem: &pb.Problem{Code: code, Message: "the call was refused before it ran"}}
	}
	w := &pb.ExecutionError{
		Certainty:   pb.Certainty_CERTAINTY_DEFINITIVE,
		RetryAdvice: pb.RetryAdvice_RETRY_ADVICE_NEVER,
		Problem:     &pb.Problem{Code: ee.Problem().Code(), Message: ee.Problem().Message()},
	}
	if ee.Outcome() == tool.Uncertain {
		w.Certainty = pb.Certainty_CERTAINTY_UNCERTAIN
	}
	if ee.Retry() == tool.RetryAllowed {
		w.RetryAdvice = pb.RetryAdvice_RETRY_ADVICE_ALLOWED
		w.RetryAfterMillis = uint64(ee.RetryAfter() / time.Millisecond)
	}
	return w
}
