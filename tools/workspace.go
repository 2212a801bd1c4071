package tools

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// MaxPathBytes bounds a path argument.
const MaxPathBytes = 1 << 10

// Model-visible problems about paths.
var (
	problemEmptyPath    = problem.Must(CodeInvalidArguments, "the path must not be empty")
	problemLongPath     = problem.Must(CodeInvalidArguments, "the path is longer than 1024 bytes")
	problemBadPath      = problem.Must(CodeInvalidArguments, "the path cannot be used on this system")
	problemAbsolute     = problem.Must(CodeOutsideWorkspace, "absolute paths are not allowed; give a path relative to the workspace root")
	problemEscapes      = problem.Must(CodeOutsideWorkspace, "the path leaves the workspace")
	problemLinkEscapes  = problem.Must(CodeOutsideWorkspace, "the path goes through a symbolic link that leads outside the workspace")
	problemRoot         = problem.Must(CodeNotAFile, "the path names the workspace root, not a file")
	problemNotFound     = problem.Must(CodeNotFound, "no file exists at this path")
	problemUnresolvable = problem.Must(CodeNotFound, "the path goes through a symbolic link that cannot be resolved")
	problemParentFile   = problem.Must(CodeNotADirectory, "a directory in the path is a file")
)

// workspace is a directory the file tools are confined to.
type workspace struct {
	root string // absolute, symbolic links resolved, cleaned
}

// openWorkspace resolves dir once. It must be an existing directory.
func openWorkspace(dir string) (workspace, error) {
	if dir == "" {
		return workspace{}, bound.Missing("tools.root")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return workspace{}, bound.Malformedf("tools.root", "cannot be made absolute")
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return workspace{}, bound.Malformedf("tools.root", "must be an existing directory")
	}
	fi, err := os.Stat(resolved)
	if err != nil || !fi.IsDir() {
		return workspace{}, bound.Malformedf("tools.root", "must be an existing directory")
	}
	return workspace{root: resolved}, nil
}

// local checks a path argument lexically and returns it in the system's
// form, relative to the root. The zero problem means it is acceptable.
func local(p string) (string, problem.Problem) {
	switch {
	case p == "":
		return "", problemEmptyPath
	case len(p) > MaxPathBytes:
		return "", problemLongPath
	case strings.IndexByte(p, 0) >= 0:
		return "", problemBadPath
	case path.IsAbs(p), filepath.IsAbs(p), filepath.VolumeName(p) != "", strings.HasPrefix(p, `\`):
		return "", problemAbsolute
	}
	c := path.Clean(filepath.ToSlash(p))
	switch {
	case c == "..", strings.HasPrefix(c, "../"):
		return "", problemEscapes
	case c == ".":
		return "", problemRoot
	}
	l, err := filepath.Localize(c)
	if err != nil {
		return "", problemBadPath
	}
	return l, problem.Problem{}
}

// resolve evaluates the symbolic links of the existing part of rel (a
// result of local) and returns the resolved path relative to the root. It
// refuses a path that resolves outside the root. The problem is for the
// model; the error is an I/O failure the model cannot fix.
func (w workspace) resolve(rel string) (string, problem.Problem, error) {
	existing := filepath.Join(w.root, rel)
	var missing []string // trailing elements that do not exist yet, innermost first
	for existing != w.root {
		_, err := os.Lstat(existing)
		if err == nil {
			break
		}
		if errors.Is(err, syscall.ENOTDIR) {
			return "", problemParentFile, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", problem.Problem{}, err
		}
		missing = append(missing, filepath.Base(existing))
		existing = filepath.Dir(existing)
	}
	if existing == w.root {
		// Nothing of the path exists yet. The root was resolved at
		// construction; if it is gone, that is the host's failure.
		if _, err := os.Stat(w.root); err != nil {
			return "", problem.Problem{}, err
		}
		return rel, problem.Problem{}, nil
	}
	resolved, err := filepath.EvalSymlinks(existing)
	switch {
	case errors.Is(err, syscall.ENOTDIR):
		return "", problemParentFile, nil
	case err != nil:
		// A dangling link, a loop of links or a directory that vanished:
		// nothing the model can read or write through.
		return "", problemUnresolvable, nil
	case !w.contains(resolved):
		return "", problemLinkEscapes, nil
	}
	for i := len(missing) - 1; i >= 0; i-- {
		resolved = filepath.Join(resolved, missing[i])
	}
	out, err := filepath.Rel(w.root, resolved)
	if err != nil {
		return "", problemLinkEscapes, nil
	}
	return out, problem.Problem{}, nil
}

// contains reports whether p, absolute and resolved, is the root or below it.
func (w workspace) contains(p string) bool {
	if p == w.root {
		return true
	}
	prefix := w.root
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	return strings.HasPrefix(p, prefix)
}

// target checks and resolves a path argument in one step.
func (w workspace) target(p string) (string, problem.Problem, error) {
	l, prob := local(p)
	if !prob.IsZero() {
		return "", prob, nil
	}
	return w.resolve(l)
}

// explain turns an error from an os.Root operation on rel into a problem
// for the model when it is one: a missing file, a file where a directory
// should be, or a path that escaped the root since resolve checked it (the
// os.Root refused it). Otherwise the problem is zero and the caller reports
// an I/O failure.
func (w workspace) explain(rel string, err error) problem.Problem {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return problemNotFound
	case errors.Is(err, syscall.ENOTDIR):
		return problemParentFile
	}
	if _, prob, rerr := w.resolve(rel); rerr == nil && !prob.IsZero() {
		return prob
	}
	return problem.Problem{}
}
