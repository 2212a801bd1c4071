package devloop

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spice-orch/spice-orch/plugins/host"
	"github.com/spice-orch/spice-orch/plugins/internal/pin"
)

// Bounds of a Python build.
const (
	// maxPythonBytes bounds the launcher and the files a build copies.
	maxPythonBytes = 256 << 20
	// maxLockBytes bounds the lock file that checkLock reads.
	maxLockBytes = 4 << 20
	// maxShebangBytes bounds the launcher's first line.
	maxShebangBytes = 512
	// DefaultLock is the lock file of a Python plugin without Python.Lock.
	DefaultLock = "requirements.txt"
)

// Python names what a Python plugin's pin covers.
type Python struct {
	// Launcher is the absolute path of the plugin's launcher: an
	// executable script whose #! line names the interpreter of a virtual
	// environment made from the lock file. That interpreter also checks
	// the sources' syntax.
	Launcher string
	// Files are clean relative slash-separated paths under Config.Dir, of
	// files or folders (walked), that the plugin loads: its packages and
	// its lock file. The pin covers them and the launcher.
	Files []string
	// Lock is the hash-locked requirements file among Files; "" means
	// DefaultLock.
	Lock string
}

// PythonBuilder "builds" a Python plugin: it copies the launcher and the
// files into a content-addressed folder, verified against their pin, and
// checks there that the lock file is hash-locked and that every source
// compiles. Nothing is written into the source folder.
type PythonBuilder struct {
	Dir string // absolute folder of the plugin's files
	Out string // absolute folder of the builds
	py  Python
}

// NewPythonBuilder validates the launcher and the files' names.
func NewPythonBuilder(py Python, dir, out string) (*PythonBuilder, error) {
	for _, p := range []string{py.Launcher, dir, out} {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return nil, fmt.Errorf("devloop: %q is not a clean absolute path", p)
		}
	}
	if py.Lock == "" {
		py.Lock = DefaultLock
	}
	py.Files = slices.Clone(py.Files)
	if !slices.ContainsFunc(py.Files, func(f string) bool { return f == py.Lock || strings.HasPrefix(py.Lock, f+"/") }) {
		py.Files = append(py.Files, py.Lock)
	}
	if err := (pin.Set{Exe: py.Launcher, Root: dir, Files: py.Files}).Validate(); err != nil {
		return nil, fmt.Errorf("devloop: %w", err)
	}
	return &PythonBuilder{Dir: dir, Out: out, py: py}, nil
}

// Name is the folder's base name.
func (b *PythonBuilder) Name() string { return filepath.Base(b.Dir) }

// Build copies the set into a temporary folder beside the builds (exe and
// root/, as a launch lays them out), checks the copies and renames the
// folder to Out/<pin>. The pin is that of the launcher and the files, so
// one source gives one folder from any folder.
func (b *PythonBuilder) Build(ctx context.Context) (Build, error) {
	start := time.Now()
	set := pin.Set{Exe: b.py.Launcher, Root: b.Dir, Files: b.py.Files}
	sum, err := pin.Digest(set, maxPythonBytes)
	if err != nil {
		return Build{}, &BuildError{Diagnostics: []Diagnostic{{Message: err.Error()}}, Err: err}
	}
	if err := os.MkdirAll(b.Out, 0o755); err != nil {
		return Build{}, err
	}
	tmp, err := os.MkdirTemp(b.Out, ".build-")
	if err != nil {
		return Build{}, err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	// The copies are verified against the pin of the sources: a save
	// during the copy is a mismatch, and the next build takes it.
	c, err := pin.Copy(tmp, set, sum, maxPythonBytes)
	if err != nil {
		return Build{}, &BuildError{Diagnostics: []Diagnostic{{Message: err.Error()}}, Err: err}
	}
	var ds []Diagnostic
	lock, err := readBounded(filepath.Join(c.Root, filepath.FromSlash(b.py.Lock)), maxLockBytes)
	if err != nil {
		ds = append(ds, Diagnostic{File: b.py.Lock, Line: 1, Message: err.Error()})
	} else {
		ds = append(ds, checkLock(b.py.Lock, lock)...)
	}
	syn, err := b.compile(ctx, c)
	if err != nil {
		if ctx.Err() != nil {
			return Build{}, ctx.Err()
		}
		return Build{}, err
	}
	if ds = append(ds, syn...); len(ds) > 0 {
		return Build{}, &BuildError{Diagnostics: ds[:min(len(ds), maxDiagnostics)], Err: ErrBuild}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Build{}, err
	}
	final := filepath.Join(b.Out, sum)
	bd := Build{Path: filepath.Join(final, "exe"), SHA256: sum, Root: filepath.Join(final, "root"), Files: slices.Clone(b.py.Files)}
	if err := os.Rename(tmp, final); err != nil {
		// Already built: keep the existing folder if it still holds the
		// same launcher and files.
		if got, derr := pin.Digest(pin.Set{Exe: bd.Path, Root: bd.Root, Files: bd.Files}, maxPythonBytes); derr != nil || got != sum {
			return Build{}, fmt.Errorf("devloop: %s holds another build: %w", final, err)
		}
	}
	bd.Took = time.Since(start)
	return bd, nil
}

// compileScript compiles each file named on stdin (NUL-separated, relative
// to argv[1]) without writing bytecode, and prints FILE:LINE: message for
// each syntax error.
const compileScript = `import sys
root = sys.argv[1]
for rel in sys.stdin.read().split("\0"):
    if not rel:
        continue
    with open(root + "/" + rel, "rb") as f:
        src = f.read()
    try:
        compile(src, rel, "exec", dont_inherit=True)
    except SyntaxError as e:
        msg = " ".join(str(e.msg or "invalid syntax").split())
        sys.stdout.write("%s:%d: %s\n" % (rel, e.lineno or 0, msg))
    except ValueError as e:
        sys.stdout.write("%s:0: %s\n" % (rel, " ".join(str(e).split())))
`

// compile checks the syntax of every .py file of the copy with the
// launcher's interpreter, in isolated mode and an empty environment.
func (b *PythonBuilder) compile(ctx context.Context, c pin.Copied) ([]Diagnostic, error) {
	interp, err := shebang(c.Exe)
	if err != nil {
		return []Diagnostic{{Message: "the launcher: " + err.Error()}}, nil
	}
	var files []string
	err = filepath.WalkDir(c.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(d.Name()) != ".py" {
			return err
		}
		rel, err := filepath.Rel(c.Root, p)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	if err != nil || len(files) == 0 {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, interp, "-I", "-B", "-c", compileScript, c.Root)
	cmd.Dir, cmd.Env = c.Root, []string{}
	cmd.Stdin = strings.NewReader(strings.Join(files, "\x00"))
	out := &boundedBuffer{max: maxBuildOutput}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return []Diagnostic{{Message: interp + ": " + err.Error()}, {Message: strings.TrimSpace(out.String())}}, nil
	}
	if out.Len() == 0 {
		return nil, nil
	}
	return parseDiagnostics(out.String()), nil
}

// shebang returns the interpreter a script's #! line names, which must be
// a clean absolute path.
func shebang(script string) (string, error) {
	f, err := os.Open(script)
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(io.LimitReader(f, maxShebangBytes), maxShebangBytes).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	rest, ok := strings.CutPrefix(line, "#!")
	fields := strings.Fields(rest)
	if !ok || len(fields) == 0 || !filepath.IsAbs(fields[0]) || filepath.Clean(fields[0]) != fields[0] {
		return "", errors.New("its first line is no #! naming an absolute interpreter")
	}
	return fields[0], nil
}

func readBounded(p string, max int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("over %d bytes", max)
	}
	return b, nil
}

// checkLock reports, at their lines, the requirements of a pip lock file
// that are not hash-locked: each must pin one version (==) and carry a
// --hash, so that the environment made from it is the one the pin names.
func checkLock(name string, data []byte) []Diagnostic {
	var ds []Diagnostic
	lines := bytes.Split(data, []byte("\n"))
	for i := 0; i < len(lines) && len(ds) < maxDiagnostics; i++ {
		first := i + 1
		logical := strings.TrimRight(string(lines[i]), "\r")
		// A backslash at the end continues the requirement.
		for strings.HasSuffix(logical, "\\") && i+1 < len(lines) {
			i++
			logical = strings.TrimSuffix(logical, "\\") + " " + strings.TrimRight(string(lines[i]), "\r")
		}
		if strings.HasPrefix(strings.TrimSpace(logical), "#") {
			continue
		}
		if j := strings.Index(logical, " #"); j >= 0 {
			logical = logical[:j]
		}
		fields := strings.Fields(logical)
		if len(fields) == 0 {
			continue
		}
		req := fields[0]
		bad := func(msg string) {
			if len(req) > 80 {
				req = req[:80] + "…"
			}
			ds = append(ds, Diagnostic{File: name, Line: first, Message: strconv.Quote(req) + " " + msg})
		}
		switch {
		case req == "-e" || req == "--editable" || strings.HasPrefix(req, "--editable="):
			bad("is an editable requirement, which no hash locks")
		case strings.HasPrefix(req, "-"):
			// An option (an index URL, --require-hashes): nothing to lock.
		case !strings.Contains(req, "=="):
			bad("is not pinned to one version (==)")
		case !slices.ContainsFunc(fields[1:], func(f string) bool { return strings.HasPrefix(f, "--hash=sha256:") }):
			bad("has no --hash=sha256: the lock file is not hash-locked")
		}
	}
	return ds
}

// builder is what the loop builds with: a Go or a Python plugin's.
type builder interface {
	Name() string
	Build(ctx context.Context) (Build, error)
}

var (
	_ builder = (*Builder)(nil)
	_ builder = (*PythonBuilder)(nil)
)

// hostConfig is the template with a build's pin.
func hostConfig(tmpl host.Config, bd Build) host.Config {
	tmpl.Path, tmpl.SHA256, tmpl.Root, tmpl.Files = bd.Path, bd.SHA256, bd.Root, slices.Clone(bd.Files)
	return tmpl
}
