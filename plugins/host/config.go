package host

import (
	"crypto/rand"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/plugins/internal/pin"
)

// Defaults of Config.
const (
	DefaultStartupTimeout     = 10 * time.Second
	DefaultMaxHandshakeBytes  = 1024
	DefaultMaxRequestBytes    = 1 << 20
	DefaultMaxResponseBytes   = 1 << 20
	DefaultCallTimeout        = 60 * time.Second
	DefaultCancelGrace        = 2 * time.Second
	DefaultShutdownGrace      = 5 * time.Second
	DefaultMaxStderrBytes     = 64 << 10
	DefaultMaxStderrLines     = 256
	DefaultMaxStderrLineBytes = 1 << 10
	DefaultMaxConcurrentCalls = 16
	DefaultMaxBinaryBytes     = 1 << 30
	// DefaultMaxProgress is also the protocol's bound: a plugin sends at
	// most this many progress messages in one call (PROTOCOL.md).
	DefaultMaxProgress = 1000
	// killWait bounds the wait for a killed process group to vanish.
	killWait = 5 * time.Second
)

// Config configures one plugin. Zero bounds take the defaults above; a
// negative bound is an error.
type Config struct {
	// Path is the absolute path of the plugin executable. No PATH lookup,
	// no directory scan.
	Path string
	// SHA256 is the pinned digest of the executable: 64 lower-case hex.
	SHA256 string
	// Name, when set, must equal the manifest's plugin name.
	Name string
	// Env is the plugin's whole environment besides the SPICE_PLUGIN_*
	// variables ("KEY=value"); nothing of the host's is inherited.
	Env []string
	// Dir is the plugin's working directory; "" means its private
	// directory.
	Dir string
	// SocketRoot is where the private directory of each launch is made;
	// "" means os.TempDir(), or a short system directory (/tmp) when that
	// is too long for a Unix socket path inside it. A SocketRoot that is
	// too long is an error.
	SocketRoot string
	// Root and Files name the files an interpreted plugin loads (its own
	// sources and its dependency lock file), which the pin then covers
	// with the executable: Files are clean relative paths under the clean
	// absolute Root, of files or directories (walked). The launch runs
	// private copies; the plugin finds the copied tree in
	// SPICE_PLUGIN_ROOT. Empty for a self-contained executable.
	Root  string
	Files []string

	StartupTimeout     time.Duration // launch to verified manifest
	MaxHandshakeBytes  int           // the handshake line, newline included (at most 1024)
	MaxRequestBytes    int           // one gRPC message to the plugin
	MaxResponseBytes   int           // one gRPC message from the plugin
	CallTimeout        time.Duration // one Execute
	CancelGrace        time.Duration // after a call's timeout, the wait for the plugin to report it before the host cuts the stream
	ShutdownGrace      time.Duration // Close: Shutdown and exit, before the kill
	MaxStderrBytes     int           // the stderr tail kept
	MaxStderrLines     int           // lines of the stderr tail kept
	MaxConcurrentCalls int           // calls in flight at once
	MaxBinaryBytes     int64         // the executable's size
	MaxProgress        int           // progress messages of one call (at most DefaultMaxProgress); more is a protocol violation

	// Random is the source of launch secrets; nil means crypto/rand.
	Random io.Reader

	// afterVerify, set only by this package's tests, runs between the
	// digest check and the exec, where they change the pinned files.
	afterVerify func(path string)
}

func (c Config) normalize() (Config, error) {
	if c.Path == "" {
		return c, &LaunchError{Kind: ErrConfig, Reason: "no path"}
	}
	if !filepath.IsAbs(c.Path) || filepath.Clean(c.Path) != c.Path {
		return c, &LaunchError{Path: c.Path, Kind: ErrRelativePath, Reason: "give a clean absolute path; there is no PATH lookup"}
	}
	if len(c.SHA256) != 64 || strings.Trim(c.SHA256, "0123456789abcdef") != "" {
		return c, &LaunchError{Path: c.Path, Kind: ErrConfig, Reason: "sha256 must be 64 lower-case hex characters"}
	}
	if err := (pin.Set{Exe: c.Path, Root: c.Root, Files: c.Files}).Validate(); err != nil {
		return c, &LaunchError{Path: c.Path, Kind: ErrConfig, Reason: err.Error(), Err: err}
	}
	if c.Name != "" {
		if err := bound.Name("plugin.name", c.Name); err != nil {
			return c, &LaunchError{Path: c.Path, Kind: ErrConfig, Reason: err.Error(), Err: err}
		}
	}
	durs := []struct {
		v   *time.Duration
		def time.Duration
		n   string
	}{
		{&c.StartupTimeout, DefaultStartupTimeout, "startup_timeout"},
		{&c.CallTimeout, DefaultCallTimeout, "call_timeout"},
		{&c.CancelGrace, DefaultCancelGrace, "cancel_grace"},
		{&c.ShutdownGrace, DefaultShutdownGrace, "shutdown_grace"},
	}
	for _, d := range durs {
		if *d.v < 0 {
			return c, &LaunchError{Path: c.Path, Kind: ErrConfig, Reason: d.n + " must not be negative"}
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	ints := []struct {
		v        *int
		def, max int
		n        string
	}{
		{&c.MaxHandshakeBytes, DefaultMaxHandshakeBytes, DefaultMaxHandshakeBytes, "max_handshake_bytes"},
		{&c.MaxRequestBytes, DefaultMaxRequestBytes, 64 << 20, "max_request_bytes"},
		{&c.MaxResponseBytes, DefaultMaxResponseBytes, 64 << 20, "max_response_bytes"},
		{&c.MaxStderrBytes, DefaultMaxStderrBytes, 16 << 20, "max_stderr_bytes"},
		{&c.MaxStderrLines, DefaultMaxStderrLines, 1 << 16, "max_stderr_lines"},
		{&c.MaxConcurrentCalls, DefaultMaxConcurrentCalls, 1 << 12, "max_concurrent_calls"},
		{&c.MaxProgress, DefaultMaxProgress, DefaultMaxProgress, "max_progress"},
	}
	for _, d := range ints {
		if *d.v < 0 || *d.v > d.max {
			return c, &LaunchError{Path: c.Path, Kind: ErrConfig, Reason: d.n + " is out of range"}
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.MaxBinaryBytes < 0 {
		return c, &LaunchError{Path: c.Path, Kind: ErrConfig, Reason: "max_binary_bytes must not be negative"}
	}
	if c.MaxBinaryBytes == 0 {
		c.MaxBinaryBytes = DefaultMaxBinaryBytes
	}
	for _, kv := range c.Env {
		if !strings.Contains(kv, "=") || strings.HasPrefix(kv, "SPICE_PLUGIN_") {
			return c, &LaunchError{Path: c.Path, Kind: ErrConfig, Reason: "env entries are KEY=value and not SPICE_PLUGIN_*"}
		}
	}
	if c.Random == nil {
		c.Random = rand.Reader
	}
	return c, nil
}
