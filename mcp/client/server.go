package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/proctree"
)

// From says where a tool's effect and replay safety came from.
type From string

const (
	FromDeclared    From = "declared"    // the operator's ToolConfig
	FromAnnotations From = "annotations" // a pinned server's hints, read conservatively
	FromDefault     From = "default"     // nothing trusted: mutating and unsafe
)

// Info describes one tool of a server, for describe commands and events.
type Info struct {
	Server string
	Name   string
	Digest string // DefinitionDigest of what the server listed
	Pinned bool   // the server's code is pinned (stdio)
	// DigestPinned: the operator pinned this definition's digest.
	DigestPinned bool
	Effect       tool.Effect
	Replay       tool.Replay
	From         From
}

// Server is one connected MCP server and its verified tools.
type Server struct {
	cfg     Config
	session *sdk.ClientSession
	tools   []*Tool
	infos   []Info
	stderr  *tail

	cmd     *exec.Cmd
	pid     int
	exited  chan struct{} // closed once the process was reaped; nil for HTTP
	readers sync.WaitGroup

	// life is cancelled with errExited once the process was reaped: a
	// call in flight ends then, even while a descendant that inherited
	// the server's stdout keeps the SDK from seeing its end. Nil for HTTP.
	life context.Context

	tree *proctree.Tree // the group and the descendants seen; nil for HTTP

	entry *nodeEntry // a Node server's private entry; nil otherwise

	closeOnce sync.Once
	closing   chan struct{}
	changed   chan struct{} // one pending tools/list_changed
}

// Connect starts or reaches the server of cfg, initializes a session,
// lists and verifies its tools. On error nothing of it is left running.
func Connect(ctx context.Context, cfg Config) (*Server, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, closing: make(chan struct{}), changed: make(chan struct{}, 1),
		stderr: &tail{maxLines: cfg.MaxStderrLines, maxBytes: cfg.MaxStderrBytes}}
	var transport sdk.Transport
	var files []*os.File
	if cfg.stdio() {
		files, err = s.verifyFiles()
		if err != nil {
			return nil, err
		}
		defer closeAll(files...)
		if testAfterVerify != nil {
			testAfterVerify()
		}
		transport, err = s.start(files)
		if err != nil {
			return nil, err
		}
	} else {
		transport = &sdk.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: &http.Client{}, MaxEventSize: cfg.MaxMessageBytes,
			OAuthHandler: cfg.OAuth}
	}
	if err := s.init(ctx, transport, files); err != nil {
		s.stop(0)
		var ce *ConnectError
		if errors.As(err, &ce) {
			ce.Stderr = s.stderr.snapshot()
		}
		return nil, err
	}
	return s, nil
}

// testAfterVerify, set by tests, runs between the check of the pinned
// files and the start: where another process could rename a file over a
// checked one.
var testAfterVerify func()

// verifyFiles opens and checks every pinned file: what is executed first,
// then the entry and the lock file.
func (s *Server) verifyFiles() ([]*os.File, error) {
	c := s.cfg
	pins := []FilePin{{Path: c.Path, SHA256: c.SHA256}}
	names := []string{"path"}
	if c.Entry != nil {
		pins, names = append(pins, *c.Entry), append(names, "entry")
	}
	if c.Lock != nil {
		pins, names = append(pins, *c.Lock), append(names, "lock")
	}
	var files []*os.File
	for i, p := range pins {
		f, err := verifyPin(c, names[i], p.Path, p.SHA256)
		if err != nil {
			closeAll(files...)
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// recheck hashes the open files again once the server runs: an overwrite
// in place between the check and the exec is caught before any tool is
// handed out.
func (s *Server) recheck(files []*os.File) error {
	c := s.cfg
	for _, f := range files {
		got, err := hashAt(c, f)
		if err != nil {
			return err
		}
		want := c.SHA256
		switch {
		case c.Entry != nil && f.Name() == c.Entry.Path:
			want = c.Entry.SHA256
		case c.Lock != nil && f.Name() == c.Lock.Path:
			want = c.Lock.SHA256
		}
		if got != want {
			return c.fail(ErrDigest, f.Name()+": changed between the check and the start")
		}
	}
	return nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// start executes the verified open file files[0] in a new process group
// with exactly the configured arguments and environment; a Node server
// runs the private copy of its verified entry, files[1].
func (s *Server) start(files []*os.File) (sdk.Transport, error) {
	c := s.cfg
	f := files[0]
	if execPath == "" || !proctree.Supported {
		return nil, c.fail(ErrStartup, "stdio servers need Linux")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, &ConnectError{Server: c.Name, Kind: ErrStartup, Err: err}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, &ConnectError{Server: c.Name, Kind: ErrStartup, Err: err}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, &ConnectError{Server: c.Name, Kind: ErrStartup, Err: err}
	}
	args := []string{c.Path}
	switch {
	case c.Entry != nil && isNode(c.Path):
		ne, err := privateEntry(c, files[1])
		if err != nil {
			closeAll(inR, inW, outR, outW, errR, errW)
			return nil, err
		}
		s.entry = ne
		args = append(args, ne.args...)
	case c.Entry != nil:
		args = append(args, c.Entry.Path)
	}
	args = append(args, c.Args...)
	cmd := &exec.Cmd{
		// The child's fd 3 is the file that was hashed: exec it, not the
		// path. A non-nil empty Env passes nothing of the host's.
		Path: execPath, Args: args, Env: append([]string{}, c.Env...), Dir: c.Dir,
		Stdin: inR, Stdout: outW, Stderr: errW, ExtraFiles: []*os.File{f},
	}
	// In a new PID namespace, or at least a new process group, so that
	// Close ends the whole tree.
	if err := proctree.Start(cmd); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		s.entry.remove()
		return nil, &ConnectError{Server: c.Name, Kind: ErrStartup, Reason: "exec failed: " + err.Error(), Err: err}
	}
	closeAll(inR, outW, errW)
	s.cmd, s.pid, s.exited = cmd, cmd.Process.Pid, make(chan struct{})
	s.tree = proctree.NewTree(s.pid, s.exited)
	life, endLife := context.WithCancelCause(context.Background())
	s.life = life
	go func() {
		_ = cmd.Wait()
		close(s.exited)
		endLife(errExited)
	}()
	s.readers.Add(1)
	go func() { defer s.readers.Done(); s.stderr.read(errR); errR.Close() }()
	return &sdk.IOTransport{Reader: outR, Writer: inW, MaxLineLength: c.MaxMessageBytes}, nil
}

// init initializes the session and lists the tools, within the startup
// and listing bounds.
func (s *Server) init(ctx context.Context, transport sdk.Transport, files []*os.File) error {
	c := s.cfg
	client := sdk.NewClient(&sdk.Implementation{Name: "spice-orch", Version: "1"}, &sdk.ClientOptions{
		Capabilities:           &sdk.ClientCapabilities{},
		ToolListChangedHandler: s.onListChanged,
	})
	sctx, cancel := context.WithTimeout(ctx, c.StartupTimeout)
	defer cancel()
	session, err := client.Connect(sctx, transport, nil)
	if err != nil {
		if errors.Is(sctx.Err(), context.DeadlineExceeded) {
			return &ConnectError{Server: c.Name, Kind: ErrStartTimeout, Reason: "no initialization within " + c.StartupTimeout.String(), Err: err}
		}
		return &ConnectError{Server: c.Name, Kind: ErrInitialize, Reason: err.Error(), Err: err}
	}
	s.session = session
	if err := s.recheck(files); err != nil {
		return err
	}
	listed, err := s.list(ctx)
	if err != nil {
		return err
	}
	s.tools, s.infos, err = s.build(listed)
	return err
}

// Relist lists the server's tools again — after a ListChanged signal or to
// check for drift — and verifies them as Connect did: a definition that
// differs from its pinned digest is refused with ErrDefinitionChanged.
// What it returns is a candidate: Tools and Info of the server stay what
// Connect verified, and runs holding a plan of those keep them.
func (s *Server) Relist(ctx context.Context) ([]tool.Tool, []Info, error) {
	listed, err := s.list(ctx)
	if err != nil {
		return nil, nil, err
	}
	ts, infos, err := s.build(listed)
	if err != nil {
		return nil, nil, err
	}
	out := make([]tool.Tool, len(ts))
	for i, t := range ts {
		out[i] = t
	}
	return out, infos, nil
}

func (s *Server) onListChanged(context.Context, *sdk.ToolListChangedRequest) {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// ListChanged is signalled once per tools/list_changed notification not
// yet taken; the caller lists again (Relist) for a candidate generation.
func (s *Server) ListChanged() <-chan struct{} { return s.changed }

// list fetches every page of tools/list within the listing bound.
func (s *Server) list(ctx context.Context) ([]*sdk.Tool, error) {
	c := s.cfg
	lctx, cancel := context.WithTimeout(ctx, c.ListTimeout)
	defer cancel()
	var out []*sdk.Tool
	var cursor string
	for {
		res, err := s.session.ListTools(lctx, &sdk.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, &ConnectError{Server: c.Name, Kind: ErrList, Reason: err.Error(), Err: err}
		}
		out = append(out, res.Tools...)
		if len(out) > c.MaxTools {
			return nil, c.fail(ErrTooManyTools, "more than max_tools")
		}
		if res.NextCursor == "" {
			return out, nil
		}
		cursor = res.NextCursor
	}
}

// DefinitionDigest is the lower-case hex SHA-256 of a tool's name,
// description, input schema and annotations, as JSON with sorted keys.
func DefinitionDigest(t *sdk.Tool) (string, error) {
	b, err := json.Marshal(struct {
		Annotations *sdk.ToolAnnotations `json:"annotations"`
		Description string               `json:"description"`
		InputSchema any                  `json:"inputSchema"`
		Name        string               `json:"name"`
	}{t.Annotations, t.Description, t.InputSchema, t.Name})
	if err != nil {
		return "", err
	}
	// A second round trip through a map sorts the keys of every object.
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "", err
	}
	b, err = json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// build verifies each listed tool against its pin and makes its kernel
// definition.
func (s *Server) build(listed []*sdk.Tool) ([]*Tool, []Info, error) {
	c := s.cfg
	var tools []*Tool
	var infos []Info
	seen := make(map[string]bool, len(listed))
	for _, t := range listed {
		if t == nil || seen[t.Name] {
			return nil, nil, c.fail(ErrDefinition, "a tool listed twice or empty")
		}
		seen[t.Name] = true
		digest, err := DefinitionDigest(t)
		if err != nil {
			return nil, nil, &ConnectError{Server: c.Name, Kind: ErrDefinition, Reason: "tool " + t.Name, Err: err}
		}
		tc := c.Tools[t.Name]
		if tc.Digest != "" && tc.Digest != digest {
			return nil, nil, c.fail(ErrDefinitionChanged, "tool "+t.Name+": the definition's digest is "+digest+", the pin is "+tc.Digest)
		}
		info := Info{Server: c.Name, Name: t.Name, Digest: digest, Pinned: c.stdio(), DigestPinned: tc.Digest != ""}
		info.Effect, info.Replay, info.From = effectOf(c.stdio(), tc, t.Annotations)
		schema, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, nil, &ConnectError{Server: c.Name, Kind: ErrDefinition, Reason: "tool " + t.Name + ": schema", Err: err}
		}
		def, err := tool.NewDefinition(tool.DefinitionConfig{
			Name: t.Name, Description: t.Description, Schema: schema,
			Effect: info.Effect, Replay: info.Replay, Capabilities: tc.Capabilities,
		})
		if err != nil {
			return nil, nil, &ConnectError{Server: c.Name, Kind: ErrDefinition, Reason: "tool " + t.Name + ": " + err.Error(), Err: err}
		}
		infos = append(infos, info)
		tools = append(tools, &Tool{s: s, def: def, info: info})
	}
	return tools, infos, nil
}

// effectOf decides a tool's effect and replay safety: the operator's
// declaration, else the annotations of a pinned server read
// conservatively, else mutating and unsafe.
func effectOf(pinned bool, tc ToolConfig, a *sdk.ToolAnnotations) (tool.Effect, tool.Replay, From) {
	switch {
	case tc.Effect != 0:
		return tc.Effect, tc.Replay, FromDeclared
	case !pinned || a == nil:
		return tool.Mutating, tool.Unsafe, FromDefault
	case a.ReadOnlyHint:
		return tool.ReadOnly, tool.Safe, FromAnnotations
	case a.IdempotentHint:
		return tool.Mutating, tool.Idempotent, FromAnnotations
	}
	return tool.Mutating, tool.Unsafe, FromAnnotations
}

// Tools returns the server's verified tools, in the order listed.
func (s *Server) Tools() []tool.Tool {
	out := make([]tool.Tool, len(s.tools))
	for i, t := range s.tools {
		out[i] = t
	}
	return out
}

// Info describes each tool and where its effect came from.
func (s *Server) Info() []Info { return append([]Info(nil), s.infos...) }

// Pinned reports whether the server's code is pinned (a stdio server).
func (s *Server) Pinned() bool { return s.cfg.stdio() }

// PID is the server process's ID; 0 for an HTTP server.
func (s *Server) PID() int { return s.pid }

// Stderr returns the kept tail of the server's stderr.
func (s *Server) Stderr() []string { return s.stderr.snapshot() }

func (s *Server) dead() bool {
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// Close ends the session and the server's whole process tree within the
// shutdown grace and the kill bound. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.stop(s.cfg.ShutdownGrace)
	})
	return nil
}

// stop closes the session; a stdio server gets grace to exit after its
// stdin closed, then its group and every descendant seen are killed, and
// the wait for them to vanish is bounded.
func (s *Server) stop(grace time.Duration) {
	s.seeTree()
	done := make(chan struct{})
	if s.session != nil {
		go func() { _ = s.session.Close(); close(done) }()
	} else {
		close(done)
	}
	if s.tree != nil {
		s.tree.End(grace, killWait)
	}
	<-done
	s.readers.Wait()
	s.entry.remove()
}

// seeTree records the server's descendants while its process runs, so
// that one that left the process group (setsid) is still ended after the
// server exits.
func (s *Server) seeTree() {
	if s.tree != nil {
		s.tree.See()
	}
}
