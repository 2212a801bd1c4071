package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
)

// EnvStore, when set, is the store path used when --store is not given.
const EnvStore = "SPICE_ORCH_STORE"

// storePath returns the store to use: --store, then $SPICE_ORCH_STORE,
// then $XDG_STATE_HOME/spice-orch/runs.db, then
// ~/.local/state/spice-orch/runs.db.
func storePath(flag string, getenv func(string) string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if p := getenv(EnvStore); p != "" {
		return p, nil
	}
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "spice-orch", "runs.db"), nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", errors.New("no home directory for the default store: use --store PATH or --no-store")
		}
	}
	return filepath.Join(home, ".local", "state", "spice-orch", "runs.db"), nil
}

// errNotDir is a workspace that names something other than a directory.
var errNotDir = errors.New("not a directory")

// notEmpty refuses a flag given as "" (--store ” would otherwise mean
// the default store).
func notEmpty(cmd *cobra.Command, names ...string) error {
	for _, name := range names {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed && f.Value.String() == "" {
			return usageErr(fmt.Errorf("--%s must not be empty", name))
		}
	}
	return nil
}

// workspace returns the directory the pair's file tools are confined to:
// --workspace, else the spec's workspace (relative to the spec file), else
// a new temporary directory that cleanup removes. A named directory is
// created when missing and never removed.
func workspace(flag string, s spec.Spec) (dir string, temporary bool, cleanup func(), err error) {
	dir = flag
	if dir == "" && s.Workspace != "" {
		if dir, err = specWorkspace(s); err != nil {
			return "", false, nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", false, nil, err
		}
		// A link swapped in while the directories were made is caught
		// here, before any tool is confined to the result.
		again, err := specWorkspace(s)
		if err != nil {
			return "", false, nil, err
		}
		if again != dir {
			return "", false, nil, spec.WorkspaceError(s, "changed while it was being created")
		}
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "spice-orch-workspace-"); err != nil {
			return "", false, nil, err
		}
		return dir, true, func() { _ = os.RemoveAll(dir) }, nil
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		what := "--workspace"
		if flag == "" {
			what = s.File + ": workspace"
		}
		return "", false, nil, fmt.Errorf("%s %s: %w", what, render.Field(dir), errNotDir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", false, nil, err
	}
	return dir, false, func() {}, nil
}

// specWorkspace resolves s's workspace against the spec's folder, through
// every symbolic link of the part that exists, and returns the real path
// it names. A path that a link leads out of the folder, or through a link
// that resolves to nothing (which MkdirAll would follow), is a
// *spec.Error at the workspace's line.
func specWorkspace(s spec.Spec) (string, error) {
	base, err := filepath.Abs(filepath.Dir(s.File))
	if err != nil {
		return "", err
	}
	if base, err = filepath.EvalSymlinks(base); err != nil {
		return "", err
	}
	parts := strings.Split(filepath.Clean(s.Workspace), string(filepath.Separator))
	p := base
	for i, part := range parts {
		next := filepath.Join(p, part)
		fi, err := os.Lstat(next)
		if errors.Is(err, os.ErrNotExist) {
			// Nothing below a missing directory exists to be a link.
			return filepath.Join(append([]string{p}, parts[i:]...)...), nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if next, err = filepath.EvalSymlinks(next); err != nil {
				return "", spec.WorkspaceError(s, "goes through a symbolic link that resolves to nothing")
			}
		}
		if !inside(base, next) {
			return "", spec.WorkspaceError(s, "leads outside the spec's folder through a symbolic link")
		}
		p = next
	}
	return p, nil
}

// inside reports whether path is base or below it; both are clean.
func inside(base, path string) bool {
	rel, err := filepath.Rel(base, path)
	return err == nil && filepath.IsLocal(rel)
}

// colorful reports whether w is a terminal that wants colors.
func colorful(w io.Writer, getenv func(string) string) bool {
	return isTerminal(w) && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
