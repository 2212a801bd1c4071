package host

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spice-orch/spice-orch/plugins/handshake"
	"github.com/spice-orch/spice-orch/plugins/internal/pin"
	pb "github.com/spice-orch/spice-orch/plugins/pluginpb/v1"
	"github.com/spice-orch/spice-orch/proctree"
)

// windowBytes is the HTTP/2 flow-control window of plugin connections.
const windowBytes = 4 << 20

// maxSocketPath is below every system's sun_path limit.
const maxSocketPath = 100

// exitGrace bounds how long a failed Describe waits to learn whether the
// plugin exited, which decides between ErrExited and ErrStartup.
const exitGrace = time.Second

// Plugin is one launched, verified plugin process and its connection.
type Plugin struct {
	cfg      Config
	manifest Manifest
	tools    []*Tool
	secret   handshake.Secret

	cmd      *exec.Cmd
	pgid     int
	dir      string
	stdin    *os.File
	target   string
	callOpts []grpc.CallOption // the plugin's smaller message bounds, if any
	conn     *grpc.ClientConn
	client   pb.PluginServiceClient
	stderr   *tail
	slots    chan struct{}

	exited     chan struct{} // closed when the process has been reaped
	waitErr    error         // set before exited closes
	readers    sync.WaitGroup
	outR, errR *os.File // the read ends of stdout and stderr

	tree *proctree.Tree // the group and the descendants seen; nil before the start

	mu       sync.Mutex
	inflight int           // calls between beginCall and endCall
	idle     chan struct{} // closed when inflight drops to zero; nil if nobody waits

	closeOnce sync.Once
	closing   chan struct{}   // closed when Close starts: new calls are refused
	forced    context.Context // done when the host stops the plugin by force
	force     context.CancelFunc
}

// Launch starts the plugin of cfg, verifies it and returns it ready to
// serve. On error nothing of the launch is left: no process, no directory.
func Launch(ctx context.Context, cfg Config) (*Plugin, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	secret, err := handshake.NewSecret(cfg.Random)
	if err != nil {
		return nil, &LaunchError{Path: cfg.Path, Kind: ErrStartup, Reason: "no secret", Err: err}
	}
	dir, err := privateDir(cfg)
	if err != nil {
		return nil, err
	}
	// The launch executes its own copy, verified after it was written and
	// closed: what another process writes to the pinned files meanwhile
	// never runs.
	copied, err := copyVerified(dir, cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if cfg.afterVerify != nil {
		cfg.afterVerify(cfg.Path)
	}
	p := &Plugin{
		cfg: cfg, secret: secret, dir: dir,
		stderr:  &tail{maxLines: cfg.MaxStderrLines, maxBytes: cfg.MaxStderrBytes, maxLine: DefaultMaxStderrLineBytes},
		exited:  make(chan struct{}),
		closing: make(chan struct{}),
	}
	p.forced, p.force = context.WithCancel(context.Background())
	lineCh, err := p.start(copied)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := p.verify(ctx, lineCh); err != nil {
		p.force()
		p.stop(0)
		var le *LaunchError
		if errors.As(err, &le) {
			le.Stderr = p.stderr.snapshot()
		}
		return nil, err
	}
	return p, nil
}

type lineResult struct {
	line string
	err  error
}

// start executes the verified copy in a new process group (and, where the
// system allows, a new PID namespace: see doc.go).
func (p *Plugin) start(c pin.Copied) (<-chan lineResult, error) {
	cfg := p.cfg
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, &LaunchError{Path: cfg.Path, Kind: ErrStartup, Err: err}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, &LaunchError{Path: cfg.Path, Kind: ErrStartup, Err: err}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, &LaunchError{Path: cfg.Path, Kind: ErrStartup, Err: err}
	}
	wd := cfg.Dir
	if wd == "" {
		wd = p.dir
	}
	env := append(append([]string(nil), cfg.Env...),
		handshake.EnvProtocols+"="+handshake.FormatVersions(handshake.Version),
		handshake.EnvDir+"="+p.dir)
	if c.Root != "" {
		env = append(env, handshake.EnvRoot+"="+c.Root)
	}
	cmd := &exec.Cmd{
		// argv[0] names the pinned path; the file executed is the copy.
		Path: c.Exe, Args: []string{cfg.Path}, Env: env, Dir: wd,
		Stdin: inR, Stdout: outW, Stderr: errW,
	}
	if !proctree.Supported {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, &LaunchError{Path: cfg.Path, Kind: ErrUnsupported}
	}
	if err := proctree.Start(cmd); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, &LaunchError{Path: cfg.Path, Kind: ErrStartup, Reason: "exec failed: " + err.Error(), Err: err}
	}
	closeAll(inR, outW, errW)
	p.cmd, p.pgid, p.stdin = cmd, cmd.Process.Pid, inW
	p.tree = proctree.NewTree(p.pgid, p.exited)
	go func() {
		err := cmd.Wait()
		p.waitErr = err
		close(p.exited)
	}()
	// The secret goes on stdin, never on the command line or in the
	// environment. A pipe holds far more than one line, so this does not
	// block on a plugin that does not read.
	p.outR, p.errR = outR, errR
	// The secret goes on stdin, never on the command line or in the
	// environment. A pipe holds far more than one line, so this does not
	// block on a plugin that does not read. A plugin that exits at once
	// may close stdin first: a failed write is not yet a verdict, the
	// handshake line (or the end of stdout) is.
	_, _ = inW.Write(p.secret.Line())
	lineCh := make(chan lineResult, 1)
	p.readers.Add(2)
	go func() { defer p.readers.Done(); p.stderr.read(errR); errR.Close() }()
	go func() {
		defer p.readers.Done()
		defer outR.Close()
		br := bufio.NewReaderSize(outR, cfg.MaxHandshakeBytes)
		b, err := br.ReadSlice('\n')
		lineCh <- lineResult{line: string(b), err: err}
		// After the line, stdout is drained and discarded so that the
		// plugin never blocks on it.
		_, _ = io.Copy(io.Discard, br)
	}()
	return lineCh, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// verify waits for the handshake line, checks it, connects and verifies
// the manifest, all within the startup timeout.
func (p *Plugin) verify(ctx context.Context, lineCh <-chan lineResult) error {
	cfg := p.cfg
	ctx, cancel := context.WithTimeout(ctx, cfg.StartupTimeout)
	defer cancel()
	fail := func(kind error, reason string, err error) error {
		return &LaunchError{Path: cfg.Path, Kind: kind, Reason: reason, Err: err}
	}
	var lr lineResult
	select {
	case lr = <-lineCh:
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fail(ErrStartTimeout, "no handshake line within "+cfg.StartupTimeout.String(), nil)
		}
		return fail(ErrStartup, "cancelled", ctx.Err())
	}
	line, hasNL := strings.CutSuffix(lr.line, "\n")
	switch {
	case lr.err == bufio.ErrBufferFull:
		if !strings.HasPrefix(line, handshake.Prefix+"|") {
			return fail(ErrContaminated, "", nil)
		}
		return fail(ErrHandshake, "the line exceeds max_handshake_bytes", nil)
	case !hasNL && !strings.HasPrefix(handshake.Prefix+"|", line) && !strings.HasPrefix(line, handshake.Prefix+"|"):
		return fail(ErrContaminated, "", nil)
	case !hasNL:
		return fail(ErrExited, "stdout closed before the handshake line", lr.err)
	case !strings.HasPrefix(line, handshake.Prefix+"|"):
		return fail(ErrContaminated, "", nil)
	}
	hl, err := handshake.Parse(line)
	if err != nil {
		return fail(ErrHandshake, err.Error(), err)
	}
	if hl.Version != handshake.Version {
		return fail(ErrProtocol, "the handshake names another version", nil)
	}
	if !p.secret.CheckProof(hl) {
		return fail(ErrProof, "", nil)
	}
	target := "passthrough:///127.0.0.1"
	switch hl.Network {
	case handshake.NetworkUnix:
		if !hl.InDir(p.dir) {
			return fail(ErrHandshake, "the socket is not in the private directory", nil)
		}
		target = "unix://" + hl.Address
	case handshake.NetworkTCP:
		target = "passthrough:///" + hl.Address
	}
	p.target = target
	conn, err := newConn(target, p.secret.HostAuth(), cfg)
	if err != nil {
		return fail(ErrStartup, "cannot connect", err)
	}
	p.conn, p.client = conn, pb.NewPluginServiceClient(conn)
	// A plugin that exits after its line will never answer: its exit ends
	// the wait, not the startup bound.
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	go func() {
		select {
		case <-p.exited:
			dcancel()
		case <-dctx.Done():
		}
	}()
	resp, err := p.client.Describe(dctx, &pb.DescribeRequest{HostProtocolVersions: []uint32{handshake.Version}}, grpc.WaitForReady(true))
	if err != nil {
		// A plugin that exits right after its line fails the call as its
		// socket closes, which can come before the process is reaped: give
		// the reaper a short, bounded while to say so.
		grace := time.NewTimer(exitGrace)
		select {
		case <-p.exited:
			grace.Stop()
			return fail(ErrExited, "the plugin exited after its handshake line", err)
		case <-ctx.Done():
		case <-grace.C:
		}
		grace.Stop()
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fail(ErrStartTimeout, "no manifest within "+cfg.StartupTimeout.String(), err)
		}
		return fail(ErrStartup, "describe failed", err)
	}
	m, err := verifyManifest(resp.GetManifest(), cfg)
	if err != nil {
		return err
	}
	m.Digest = cfg.SHA256
	m.Path = cfg.Path
	p.manifest = m
	if m.Bounds.MaxResponseBytes < cfg.MaxResponseBytes {
		p.callOpts = append(p.callOpts, grpc.MaxCallRecvMsgSize(m.Bounds.MaxResponseBytes))
	}
	if m.Bounds.MaxRequestBytes < cfg.MaxRequestBytes {
		p.callOpts = append(p.callOpts, grpc.MaxCallSendMsgSize(m.Bounds.MaxRequestBytes))
	}
	// Sized by the effective bound, the smaller of the host's and the
	// manifest's, which is known only now.
	p.slots = make(chan struct{}, m.Bounds.MaxConcurrentCalls)
	p.tools = make([]*Tool, len(m.Tools))
	for i, def := range m.Tools {
		p.tools[i] = &Tool{p: p, def: def}
	}
	return nil
}

// newConn makes the one gRPC connection of a launch, with the message
// bounds both ways and the host's proof on every call.
func newConn(target, auth string, cfg Config) (*grpc.ClientConn, error) {
	return grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(authCreds{md: map[string]string{handshake.AuthMetadata: auth}}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.MaxResponseBytes), grpc.MaxCallSendMsgSize(cfg.MaxRequestBytes)),
		grpc.WithDisableServiceConfig(),
		grpc.WithSharedWriteBuffer(true),
		// Fixed windows turn off BDP estimation, whose pings cost a local
		// connection round trips for nothing.
		grpc.WithInitialWindowSize(windowBytes), grpc.WithInitialConnWindowSize(windowBytes),
	)
}

// authCreds attaches the host's proof of the secret to every call.
type authCreds struct {
	md map[string]string // never written after newConn: gRPC copies it into each call's headers
}

func (a authCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return a.md, nil
}

func (authCreds) RequireTransportSecurity() bool { return false }

// stop ends the plugin's process tree: after grace (0: at once) it kills
// the group and every descendant seen, waits for the leader and, bounded,
// for the rest to vanish, then bounds the wait for its pipes, which an
// escaped descendant could otherwise hold open for ever.
func (p *Plugin) stop(grace time.Duration) {
	p.seeTree()
	if p.stdin != nil {
		p.stdin.Close()
	}
	p.tree.End(grace, killWait)
	if p.conn != nil {
		p.conn.Close()
	}
	p.waitReaders(killWait)
	os.RemoveAll(p.dir)
}

// seeTree records the plugin's descendants while its process runs, so
// that a descendant that left the process group (setsid) is still ended
// after the plugin exits. Inside a PID namespace the kernel ends them with
// the plugin anyway.
func (p *Plugin) seeTree() {
	if p.tree != nil {
		p.tree.See()
	}
}

// waitReaders waits up to max for the stdout and stderr readers, then
// closes the read ends, which ends them.
func (p *Plugin) waitReaders(max time.Duration) {
	done := make(chan struct{})
	go func() {
		p.readers.Wait()
		close(done)
	}()
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	if p.outR != nil {
		p.outR.Close()
	}
	if p.errR != nil {
		p.errR.Close()
	}
	<-done
}
