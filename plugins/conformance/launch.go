//go:build unix

package conformance

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spice-orch/spice-orch/plugins/handshake"
	"github.com/spice-orch/spice-orch/plugins/internal/pin"
	"github.com/spice-orch/spice-orch/proctree"
)

// ProcessLauncher is the suite's own minimal launcher, written from
// PROTOCOL.md: it copies the pinned files into a private directory and
// verifies the copy against the pin (so the bytes executed are the bytes
// verified), starts it in a new process group with the secret on stdin,
// reads the handshake line within a byte and time bound, verifies the
// proof and dials the endpoint. Close ends the plugin's whole process
// tree, a descendant in its own session included.
type ProcessLauncher struct {
	Path   string // absolute
	SHA256 string // the pin: of the executable's bytes, or of its files' listing
	// Root and Files are the files an interpreted plugin loads, which the
	// pin covers with the executable (PROTOCOL.md, Pinning); the plugin
	// finds their verified copies in SPICE_PLUGIN_ROOT.
	Root  string
	Files []string
	// Env is added to the plugin's environment (a fixture's switches).
	Env []string
	// StartTimeout bounds launch to handshake line; 0 means 20s.
	StartTimeout time.Duration
	// StopGrace bounds Close's wait for a voluntary exit before the
	// process group is killed; 0 means 2s.
	StopGrace time.Duration
}

const (
	maxExecutableBytes = 256 << 20
	stderrTail         = 16 << 10
)

// Launch implements Launcher.
func (l ProcessLauncher) Launch(ctx context.Context, cfg LaunchConfig) (Target, error) {
	if !filepath.IsAbs(l.Path) {
		return nil, ErrPath
	}
	dir, err := os.MkdirTemp("", "spc-")
	if err != nil {
		return nil, err
	}
	pd := filepath.Join(dir, "pin")
	if err := os.Mkdir(pd, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	copied, err := pin.Copy(pd, pin.Set{Exe: l.Path, Root: l.Root, Files: l.Files}, strings.ToLower(l.SHA256), maxExecutableBytes)
	if err != nil {
		os.RemoveAll(dir)
		if errors.Is(err, pin.ErrMismatch) {
			return nil, fmt.Errorf("%w: %w", ErrDigest, err)
		}
		return nil, err
	}
	t := &process{dir: dir, done: make(chan struct{}), grace: cmpDur(l.StopGrace, 2*time.Second)}
	t.stderr.ended = make(chan struct{})
	if err := t.start(ctx, l, cfg, copied); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// process is the Target of a ProcessLauncher.
type process struct {
	dir    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	conn   *grpc.ClientConn
	token  string
	hs     Handshake
	grace  time.Duration
	done   chan struct{}
	reads  sync.WaitGroup // the stdout and stderr readers
	outR   *os.File
	errR   *os.File
	stderr tail

	closeOnce sync.Once
}

func (p *process) start(ctx context.Context, l ProcessLauncher, cfg LaunchConfig, c pin.Copied) error {
	sock := filepath.Join(p.dir, "run")
	if err := os.Mkdir(sock, 0o700); err != nil {
		return err
	}
	secret, err := handshake.NewSecret(rand.Reader)
	if err != nil {
		return err
	}
	protocols := cfg.Protocols
	if protocols == "" {
		protocols = "1"
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	p.cmd = exec.Command(c.Exe)
	p.cmd.Dir = p.dir
	p.cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + p.dir, "LANG=C.UTF-8",
		handshake.EnvProtocols + "=" + protocols, handshake.EnvDir + "=" + sock}, l.Env...)
	if c.Root != "" {
		p.cmd.Env = append(p.cmd.Env, handshake.EnvRoot+"="+c.Root)
	}
	p.cmd.Stdout, p.cmd.Stderr = outW, errW
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return err
	}
	err = p.cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		p.cmd = nil
		return err
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	p.outR, p.errR = outR, errR
	p.reads.Add(2)
	go func() {
		defer p.reads.Done()
		p.stderr.fill(errR)
	}()
	lines := make(chan []byte, 1)
	go func() {
		defer p.reads.Done()
		br := bufio.NewReaderSize(io.LimitReader(outR, MaxHandshakeLine), MaxHandshakeLine)
		line, _ := br.ReadSlice('\n')
		lines <- bytes.Clone(line)
		io.Copy(io.Discard, outR) // stdout after the handshake is drained and dropped
	}()
	// A plugin that exits at once may close stdin first: a failed write is
	// not yet a verdict, the handshake line (or its absence) is.
	p.stdin.Write(secret.Line())
	timer := time.NewTimer(cmpDur(l.StartTimeout, 20*time.Second))
	defer timer.Stop()
	var line []byte
	select {
	case line = <-lines:
	case <-timer.C:
		return ErrStartTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
	if len(line) >= MaxHandshakeLine && line[len(line)-1] != '\n' {
		return fmt.Errorf("%w: no complete line within %d bytes", ErrHandshake, MaxHandshakeLine)
	}
	if len(line) == 0 || line[len(line)-1] != '\n' {
		// stdout ended before a newline: the plugin is exiting.
		select {
		case <-p.done:
			return fmt.Errorf("%w (%s)%s", ErrExited, p.cmd.ProcessState, p.lastLog())
		case <-timer.C:
			return fmt.Errorf("%w: stdout closed before a complete line", ErrHandshake)
		}
	}
	hs, err := handshake.Parse(strings.TrimSuffix(string(line), "\n"))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	if !secret.CheckProof(hs) {
		return ErrProof
	}
	// A case may offer versions the host's parser refuses to read (0):
	// the offer is compared as the text it was.
	if !slices.Contains(strings.Split(protocols, ","), strconv.FormatUint(uint64(hs.Version), 10)) {
		return fmt.Errorf("%w: %d, offered %q", ErrProtocol, hs.Version, protocols)
	}
	target := "passthrough:///" + hs.Address
	if hs.Network == handshake.NetworkUnix {
		if !strings.HasPrefix(hs.Address, sock+string(filepath.Separator)) {
			return fmt.Errorf("%w: the socket is not in %s", ErrHandshake, handshake.EnvDir)
		}
		target = "unix://" + hs.Address
	}
	p.conn, err = grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxCallMessage), grpc.MaxCallSendMsgSize(maxCallMessage)))
	if err != nil {
		return err
	}
	p.hs, p.token = hs, secret.HostAuth()
	return nil
}

func (p *process) Conn() grpc.ClientConnInterface { return p.conn }
func (p *process) AuthToken() string              { return p.token }
func (p *process) Handshake() Handshake           { return p.hs }
func (p *process) PID() int                       { return p.cmd.Process.Pid }
func (p *process) Done() <-chan struct{}          { return p.done }
func (p *process) CloseStdin() error              { return p.stdin.Close() }

// lastLog returns ": " and the plugin's last stderr line, at most 200
// bytes, once the stderr reader has seen the end (bounded by the grace):
// why a plugin refused to start. It is the plugin's own log, which never
// holds the host's secret.
func (p *process) lastLog() string {
	timer := time.NewTimer(p.grace)
	defer timer.Stop()
	select {
	case <-p.stderr.ended:
	case <-timer.C:
	}
	s := strings.TrimSpace(p.stderr.String())
	s = s[strings.LastIndexByte(s, '\n')+1:]
	if len(s) > 200 {
		s = s[:200]
	}
	if s == "" {
		return ""
	}
	return ": " + strconv.QuoteToGraphic(s)
}

// Close implements Target: stdin EOF, StopGrace for a voluntary exit, then
// SIGKILL to the whole process group and to every descendant seen while
// the plugin ran, which also ends one that left the group or its session.
func (p *process) Close() error {
	p.closeOnce.Do(func() {
		if p.conn != nil {
			p.conn.Close()
		}
		if p.cmd != nil {
			var tree []proctree.Proc
			select {
			case <-p.done:
			default:
				tree = proctree.Descendants(p.cmd.Process.Pid)
			}
			p.stdin.Close()
			timer := time.NewTimer(p.grace)
			select {
			case <-p.done:
			case <-timer.C:
			}
			timer.Stop()
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			proctree.Kill(tree)
			<-p.done // SIGKILL cannot be ignored: the leader is reaped soon
			awaitGroupGone(p.cmd.Process.Pid, p.grace)
			awaitTreeGone(tree, p.grace)
			p.waitReads()
		}
		os.RemoveAll(p.dir)
	})
	return nil
}

// waitReads waits for the pipe readers. A descendant that left the
// process group may still hold a pipe open: after a bound the read ends
// are closed, which ends the readers.
func (p *process) waitReads() {
	ended := make(chan struct{})
	go func() {
		p.reads.Wait()
		close(ended)
	}()
	timer := time.NewTimer(p.grace)
	defer timer.Stop()
	select {
	case <-ended:
	case <-timer.C:
		p.outR.Close()
		p.errR.Close()
		<-ended
	}
	p.outR.Close()
	p.errR.Close()
}

// tail keeps the last stderrTail bytes of a stream.
type tail struct {
	mu    sync.Mutex
	buf   []byte
	ended chan struct{} // closed when fill returns
}

func (t *tail) fill(r io.Reader) {
	defer close(t.ended)
	chunk := make([]byte, 4096)
	for {
		n, err := r.Read(chunk)
		t.mu.Lock()
		t.buf = append(t.buf, chunk[:n]...)
		if len(t.buf) > stderrTail {
			t.buf = append(t.buf[:0], t.buf[len(t.buf)-stderrTail:]...)
		}
		t.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
