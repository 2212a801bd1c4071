package client

import (
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Defaults of Config.
const (
	DefaultStartupTimeout  = 10 * time.Second
	DefaultListTimeout     = 10 * time.Second
	DefaultCallTimeout     = 60 * time.Second
	DefaultShutdownGrace   = 2 * time.Second
	DefaultMaxMessageBytes = 1 << 20
	DefaultMaxResultBytes  = bound.MaxToolResultBytes
	DefaultMaxStderrBytes  = 64 << 10
	DefaultMaxStderrLines  = 256
	DefaultMaxTools        = 64
	DefaultMaxFileBytes    = 1 << 30
	// killWait bounds the wait for a killed process tree to vanish.
	killWait = 5 * time.Second
)

// FilePin names a file by absolute path and pins its SHA-256.
type FilePin struct {
	Path   string
	SHA256 string
}

// ToolConfig is the operator's word on one tool. Every field is optional.
type ToolConfig struct {
	// Digest pins the tool's definition (see DefinitionDigest).
	Digest string
	// Effect and Replay, when set, are the declaration that wins over
	// annotations. Set both or neither.
	Effect tool.Effect
	Replay tool.Replay
	// Capabilities are the tool's declared capabilities.
	Capabilities []tool.Capability
}

// Config configures one MCP server: either a stdio server (Path) or a
// streamable-HTTP server (URL). Zero bounds take the defaults above; a
// negative bound is an error.
type Config struct {
	// Name names the server in errors, events and Info. Required.
	Name string

	// Path is the absolute path of what is executed: the server's
	// executable, or the interpreter of an interpreted server. No PATH
	// lookup.
	Path string
	// SHA256 pins the bytes at Path: 64 lower-case hex.
	SHA256 string
	// Entry, for an interpreted server, is the file the interpreter runs;
	// its path is the interpreter's first argument, before Args.
	Entry *FilePin
	// Lock, for an interpreted server, is its dependency lock file (for
	// example package-lock.json of the folder it runs from).
	Lock *FilePin
	// Args are the arguments after Entry; nothing else is passed.
	Args []string
	// Env is the server's whole environment ("KEY=value"); nothing of the
	// host's environment passes.
	Env []string
	// Dir is the working directory; "" means the folder of Entry, or of
	// Path.
	Dir string

	// URL is a streamable-HTTP endpoint: http on a loopback address, or
	// https. Such a server is unpinned.
	URL string
	// OAuth, for a URL, authorizes the requests when the server asks for
	// it (the SDK's OAuth 2.1 authorization code flow,
	// auth.AuthorizationCodeHandler); nil sends none, and a server that
	// needs authorization is refused at connection.
	OAuth auth.OAuthHandler

	// Tools is the operator's word on each tool, by MCP tool name.
	Tools map[string]ToolConfig

	StartupTimeout  time.Duration // launch through initialization
	ListTimeout     time.Duration // one tools/list, all pages
	CallTimeout     time.Duration // one tools/call
	ShutdownGrace   time.Duration // Close: stdin closed, then the kill
	MaxMessageBytes int           // one JSON-RPC message either way
	MaxResultBytes  int           // the text of one tool result
	MaxStderrBytes  int           // the stderr tail kept
	MaxStderrLines  int           // lines of the stderr tail kept
	MaxTools        int           // tools one server may list
	MaxFileBytes    int64         // each pinned file's size
}

func (c Config) stdio() bool { return c.URL == "" }

func (c Config) fail(kind error, reason string) error {
	return &ConnectError{Server: c.Name, Kind: kind, Reason: reason}
}

func validDigest(s string) bool {
	return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
}

func checkPin(c Config, what, path, digest string) error {
	if path == "" {
		return c.fail(ErrConfig, what+": no path")
	}
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return c.fail(ErrRelativePath, what+" "+path+": give a clean absolute path; there is no PATH lookup")
	}
	if !validDigest(digest) {
		return c.fail(ErrConfig, what+": sha256 must be 64 lower-case hex characters")
	}
	return nil
}

func (c Config) normalize() (Config, error) {
	if err := bound.Name("mcp.name", c.Name); err != nil {
		return c, &ConnectError{Server: c.Name, Kind: ErrConfig, Reason: err.Error(), Err: err}
	}
	switch {
	case c.URL != "" && (c.Path != "" || c.Entry != nil || c.Lock != nil || len(c.Args) > 0 || len(c.Env) > 0):
		return c, c.fail(ErrConfig, "give either a URL or a path, not both")
	case c.URL == "" && c.OAuth != nil:
		return c, c.fail(ErrConfig, "OAuth authorizes a URL's requests; a stdio server has none")
	case c.URL != "":
		if err := checkURL(c.URL); err != nil {
			return c, c.fail(ErrURL, err.Error())
		}
	default:
		if err := checkPin(c, "path", c.Path, c.SHA256); err != nil {
			return c, err
		}
		if c.Entry != nil {
			if err := checkPin(c, "entry", c.Entry.Path, c.Entry.SHA256); err != nil {
				return c, err
			}
		}
		if c.Lock != nil {
			if c.Entry == nil {
				return c, c.fail(ErrConfig, "a lock file pins the dependencies of an entry file: give the entry")
			}
			if err := checkPin(c, "lock", c.Lock.Path, c.Lock.SHA256); err != nil {
				return c, err
			}
		}
		for _, kv := range c.Env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return c, c.fail(ErrConfig, "env entries are KEY=value")
			}
		}
		if c.Dir != "" && !filepath.IsAbs(c.Dir) {
			return c, c.fail(ErrRelativePath, "dir must be absolute")
		}
		if c.Dir == "" {
			c.Dir = filepath.Dir(c.Path)
			if c.Entry != nil {
				c.Dir = filepath.Dir(c.Entry.Path)
			}
		}
	}
	for name, tc := range c.Tools {
		if tc.Digest != "" && !validDigest(tc.Digest) {
			return c, c.fail(ErrConfig, "tool "+name+": digest must be 64 lower-case hex characters")
		}
		if (tc.Effect == 0) != (tc.Replay == 0) {
			return c, c.fail(ErrConfig, "tool "+name+": declare effect and replay together")
		}
	}
	durs := []*time.Duration{&c.StartupTimeout, &c.ListTimeout, &c.CallTimeout, &c.ShutdownGrace}
	ddefs := []time.Duration{DefaultStartupTimeout, DefaultListTimeout, DefaultCallTimeout, DefaultShutdownGrace}
	for i, d := range durs {
		if *d < 0 {
			return c, c.fail(ErrConfig, "durations must not be negative")
		}
		if *d == 0 {
			*d = ddefs[i]
		}
	}
	ints := []*int{&c.MaxMessageBytes, &c.MaxResultBytes, &c.MaxStderrBytes, &c.MaxStderrLines, &c.MaxTools}
	idefs := []int{DefaultMaxMessageBytes, DefaultMaxResultBytes, DefaultMaxStderrBytes, DefaultMaxStderrLines, DefaultMaxTools}
	for i, n := range ints {
		if *n < 0 {
			return c, c.fail(ErrConfig, "bounds must not be negative")
		}
		if *n == 0 {
			*n = idefs[i]
		}
	}
	if c.MaxResultBytes > bound.MaxToolResultBytes {
		return c, c.fail(ErrConfig, "max_result_bytes exceeds the kernel's tool result bound")
	}
	if c.MaxFileBytes < 0 {
		return c, c.fail(ErrConfig, "bounds must not be negative")
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	return c, nil
}

// checkURL admits https anywhere and http only on a loopback address.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.User != nil {
		return errString("credentials in the URL are refused")
	}
	switch u.Scheme {
	case "https":
		if u.Host == "" {
			return errString("no host")
		}
		return nil
	case "http":
		h := u.Hostname()
		if h == "localhost" {
			return nil
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
			return nil
		}
		return errString("plain http only on a loopback address")
	}
	return errString("scheme must be https, or http on loopback")
}

type errString string

func (e errString) Error() string { return string(e) }
