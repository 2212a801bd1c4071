package devloop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spice-orch/spice-orch/plugins/host"
)

// Bounds of a build's output and its diagnostics.
const (
	maxBuildOutput     = 64 << 10
	maxDiagnostics     = 50
	maxDiagnosticBytes = 512
)

// ErrBuild: the compiler refused the source; the diagnostics say where.
var ErrBuild = errors.New("build failed")

// Diagnostic is one message about a candidate, at a source location when
// one is known.
type Diagnostic struct {
	File    string // relative to the plugin's folder; "" when none is known
	Line    int
	Message string
}

// String is FILE:LINE: message, or the message alone without a location.
func (d Diagnostic) String() string {
	if d.File == "" {
		return d.Message
	}
	return d.File + ":" + strconv.Itoa(d.Line) + ": " + d.Message
}

// Build is one complete build in its content-addressed folder.
type Build struct {
	Path   string // Out/<SHA256>/<name> of a Go plugin, Out/<SHA256>/exe of a Python plugin's launcher
	SHA256 string // the pin: host.Config.SHA256
	// Root and Files are the files a Python plugin loads (host.Config.Root
	// and Files): Out/<SHA256>/root; empty for a Go plugin.
	Root  string
	Files []string
	Took  time.Duration
}

// BuildError is a failed build with its diagnostics.
type BuildError struct {
	Diagnostics []Diagnostic
	Err         error
}

func (e *BuildError) Error() string {
	var b strings.Builder
	b.WriteString("build failed")
	for _, d := range e.Diagnostics {
		b.WriteString("\n")
		b.WriteString(d.String())
	}
	return b.String()
}

func (e *BuildError) Unwrap() error { return ErrBuild }

// Builder builds a Go main package deterministically.
type Builder struct {
	Go  string // absolute path of the go command
	Dir string // absolute folder of the main package
	Out string // absolute folder of the builds
	env []string
}

// NewBuilder resolves the module and build caches the go command uses,
// which the fixed build environment then names explicitly.
func NewBuilder(ctx context.Context, goCmd, dir, out string) (*Builder, error) {
	for _, p := range []string{goCmd, dir, out} {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return nil, fmt.Errorf("devloop: %q is not a clean absolute path", p)
		}
	}
	cmd := exec.CommandContext(ctx, goCmd, "env", "GOCACHE", "GOMODCACHE", "GOPATH")
	cmd.Dir = dir
	o, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("devloop: go env: %w", err)
	}
	v := strings.Split(strings.TrimSpace(string(o)), "\n")
	if len(v) != 3 {
		return nil, errors.New("devloop: go env: unexpected output")
	}
	return &Builder{Go: goCmd, Dir: dir, Out: out, env: []string{
		"PATH=" + filepath.Dir(goCmd),
		"GOCACHE=" + v[0], "GOMODCACHE=" + v[1], "GOPATH=" + v[2],
		"TMPDIR=" + os.TempDir(),
		// Nothing of the user's go env file, no network, no cgo, no
		// workspace, no toolchain switch: the source alone decides.
		"GOENV=off", "GOFLAGS=-mod=readonly", "GOPROXY=off", "GOSUMDB=off",
		"GOTOOLCHAIN=local", "GOWORK=off", "GO111MODULE=on", "CGO_ENABLED=0",
		"GOOS=" + runtime.GOOS, "GOARCH=" + runtime.GOARCH,
	}}, nil
}

// Name is the executable's name: the folder's base name.
func (b *Builder) Name() string { return filepath.Base(b.Dir) }

// Build compiles the package into a temporary folder beside the builds,
// pins it and renames the folder to Out/<sha256>. An existing folder of
// the same digest is kept and the new one removed: no tree at a
// content-addressed path is ever partly written.
func (b *Builder) Build(ctx context.Context) (Build, error) {
	start := time.Now()
	if err := os.MkdirAll(b.Out, 0o755); err != nil {
		return Build{}, err
	}
	tmp, err := os.MkdirTemp(b.Out, ".build-")
	if err != nil {
		return Build{}, err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	exe := filepath.Join(tmp, b.Name())
	cmd := exec.CommandContext(ctx, b.Go, "build", "-trimpath", "-buildvcs=false", "-ldflags=-buildid=", "-o", exe, ".")
	cmd.Dir, cmd.Env = b.Dir, b.env
	out := &boundedBuffer{max: maxBuildOutput}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return Build{}, ctx.Err()
		}
		return Build{}, &BuildError{Diagnostics: parseDiagnostics(out.String()), Err: err}
	}
	sum, err := host.Digest(exe)
	if err != nil {
		return Build{}, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Build{}, err
	}
	final := filepath.Join(b.Out, sum)
	if err := os.Rename(tmp, final); err != nil {
		// Already built: the same source made the same bytes. Keep the
		// existing folder if it still holds them.
		if got, derr := host.Digest(filepath.Join(final, b.Name())); derr != nil || got != sum {
			return Build{}, fmt.Errorf("devloop: %s holds another build: %w", final, err)
		}
	}
	return Build{Path: filepath.Join(final, b.Name()), SHA256: sum, Took: time.Since(start)}, nil
}

// location is the go command's FILE:LINE[:COL]: message.
var location = regexp.MustCompile(`^(\S+?):(\d+)(?::\d+)?: (.*)$`)

// parseDiagnostics turns the go command's output into diagnostics: its
// package headers go, paths lose "./", columns go (editors differ on
// them; the file and line are the stable part).
func parseDiagnostics(out string) []Diagnostic {
	var ds []Diagnostic
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || strings.HasPrefix(line, "# ") {
			continue
		}
		if len(ds) == maxDiagnostics {
			ds = append(ds, Diagnostic{Message: "more diagnostics not shown"})
			break
		}
		d := Diagnostic{Message: strings.TrimSpace(line)}
		if m := location.FindStringSubmatch(line); m != nil {
			if n, err := strconv.Atoi(m[2]); err == nil && n > 0 {
				d = Diagnostic{File: strings.TrimPrefix(m[1], "./"), Line: n, Message: m[3]}
			}
		}
		if len(d.Message) > maxDiagnosticBytes {
			d.Message = d.Message[:maxDiagnosticBytes] + "…"
		}
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		ds = append(ds, Diagnostic{Message: "the go command failed without output"})
	}
	return ds
}

// boundedBuffer keeps the first max bytes written to it.
type boundedBuffer struct {
	bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
