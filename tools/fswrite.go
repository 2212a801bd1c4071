package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"

	"github.com/spice-orch/spice-orch/idempotency"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

const fsWriteSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "The file's path relative to the workspace root, with / separators, e.g. \"notes/draft.md\". Missing directories are created."},
    "content": {"type": "string", "description": "The complete new content of the file."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`

// TempPrefix starts the name of fs.write's temporary files, which live in
// the target's directory only while a write is in progress.
const TempPrefix = ".spice-write-"

// FSWrite is the fs.write tool: it replaces one file inside the workspace
// with new content, atomically. It is immutable and safe for concurrent
// use; concurrent writes to one file leave one of the contents, whole.
type FSWrite struct {
	def tool.Definition
	ws  workspace
	max int
	// rename and sync are (*os.Root).Rename and syncDir; the package's
	// tests replace them to inject the failures a real disk rarely shows.
	rename func(root *os.Root, oldname, newname string) error
	sync   func(root *os.Root, dir string) error
	keys   *writeKeys
}

var _ tool.Tool = (*FSWrite)(nil)

// NewFSWrite returns fs.write confined to cfg.Root.
func NewFSWrite(cfg Config) (*FSWrite, error) {
	cfg, ws, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	return newFSWrite(cfg, ws)
}

func newFSWrite(cfg Config, ws workspace) (*FSWrite, error) {
	def, err := tool.NewDefinition(tool.DefinitionConfig{
		Name: NameFSWrite,
		Description: "Write a UTF-8 text file inside the workspace, replacing its whole content atomically " +
			"and creating missing directories. Content larger than " + strconv.Itoa(cfg.MaxWriteBytes) + " bytes is refused.",
		Schema: []byte(fsWriteSchema),
		Effect: tool.Mutating,
		// Writing the same content twice leaves the same file.
		Replay:       tool.Idempotent,
		Capabilities: []tool.Capability{tool.FilesystemWrite},
	})
	if err != nil {
		return nil, err
	}
	return &FSWrite{def: def, ws: ws, max: cfg.MaxWriteBytes, rename: (*os.Root).Rename, sync: syncDir,
		keys: &writeKeys{dir: cfg.Journal}}, nil
}

// Definition returns the tool's definition.
func (t *FSWrite) Definition() tool.Definition { return t.def }

// Execute writes the file and returns {"path": ..., "bytes": N}. A call
// whose context carries the idempotency key of a write this tool already
// made (Config.Journal) is not written again: it returns that write's
// result and touches no file. Mistakes
// the model can fix are problem results. An I/O failure before the rename
// is a definitive execution error (the file is unchanged; directories the
// write created stay); a failure of the rename or of syncing the directory
// after it is uncertain.
func (t *FSWrite) Execute(ctx context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
	if err := ctx.Err(); err != nil {
		return tool.Result{}, tool.Canceled(call.ID(), err)
	}
	var p, content string
	if e := decodeArgs(call.ArgumentsString(),
		stringArg{name: "path", required: true, dst: &p},
		stringArg{name: "content", required: true, dst: &content},
	); e != nil {
		return tool.NewProblemResult(call.ID(), invalidArguments(e), "")
	}
	if len(content) > t.max {
		return tool.NewProblemResult(call.ID(),
			problem.Must(CodeTooLarge, "the content is larger than "+strconv.Itoa(t.max)+" bytes"), "")
	}
	key, keyed := idempotency.FromContext(ctx)
	if keyed {
		if _, err := idempotency.Parse(key.String()); err != nil {
			keyed = false // not a name to file it under: write without one
		}
	}
	if keyed {
		defer t.keys.lock(key)()
		switch res, found, conflict := t.keys.done(key, call.ArgumentsString()); {
		case conflict:
			return tool.Result{}, tool.Fail(call.ID(), problemKeyConflict)
		case found:
			return tool.NewResult(call.ID(), res)
		}
	}
	rel, prob, err := t.ws.target(p)
	if err != nil {
		return tool.Result{}, tool.Fail(call.ID(), problemWriteIO)
	}
	if !prob.IsZero() {
		return tool.NewProblemResult(call.ID(), prob, "")
	}
	prob, err = t.write(ctx, rel, content)
	var uncertain *uncertainError
	switch {
	case errors.As(err, &uncertain):
		return tool.Result{}, tool.FailUncertain(call.ID(), problemUncertain, uncertain.err)
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return tool.Result{}, tool.Canceled(call.ID(), err)
	case err != nil:
		return tool.Result{}, tool.Fail(call.ID(), problemWriteIO)
	case !prob.IsZero():
		return tool.NewProblemResult(call.ID(), prob, "")
	}
	res := `{"path":` + strconv.Quote(path.Clean(filepath.ToSlash(p))) + `,"bytes":` + strconv.Itoa(len(content)) + `}`
	if keyed {
		// The file is written: a journal that fails to record it only
		// means a repeat writes the same content again.
		_ = t.keys.record(key, call.ArgumentsString(), res)
	}
	return tool.NewResult(call.ID(), res)
}

// uncertainError marks a failure after which the target may already hold
// the new content.
type uncertainError struct{ err error }

func (e *uncertainError) Error() string { return "write may have taken effect: " + e.err.Error() }

func (t *FSWrite) write(ctx context.Context, rel, content string) (problem.Problem, error) {
	root, err := os.OpenRoot(t.ws.root)
	if err != nil {
		return problem.Problem{}, err
	}
	defer root.Close()
	dir := filepath.Dir(rel)
	if dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return t.explain(rel, err)
		}
	}
	perm := fs.FileMode(0o644)
	keepMode := false
	switch fi, err := root.Lstat(rel); {
	case err == nil && fi.IsDir():
		return problemTargetDir, nil
	case err == nil && fi.Mode().IsRegular():
		perm, keepMode = fi.Mode().Perm(), true
	case err == nil:
		// A link (swapped in after resolve) or a special file: the rename
		// replaces the entry itself and never writes through it.
	case !errors.Is(err, fs.ErrNotExist):
		return t.explain(rel, err)
	}

	tmp := filepath.Join(dir, TempPrefix+randomHex()+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return t.explain(rel, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = root.Remove(tmp)
		}
	}()
	_, err = f.WriteString(content)
	if err == nil && keepMode {
		err = f.Chmod(perm) // the new file's mode was cut by the umask
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return problem.Problem{}, err
	}
	// The last point where stopping leaves the old file untouched.
	if err := ctx.Err(); err != nil {
		return problem.Problem{}, err
	}
	if err := t.rename(root, tmp, rel); err != nil {
		// A rename is atomic, but its error does not prove it did not
		// happen (a network file system may lose the reply).
		if _, serr := root.Lstat(tmp); errors.Is(serr, fs.ErrNotExist) {
			committed = true
		}
		return problem.Problem{}, &uncertainError{err: err}
	}
	committed = true
	if err := t.sync(root, dir); err != nil {
		return problem.Problem{}, &uncertainError{err: err}
	}
	return problem.Problem{}, nil
}

// explain maps an error before the rename to a problem for the model or a
// definitive failure.
func (t *FSWrite) explain(rel string, err error) (problem.Problem, error) {
	if prob := t.ws.explain(rel, err); !prob.IsZero() {
		if prob == problemNotFound {
			// Nothing is missing for a write except a directory that
			// vanished mid-way: an I/O failure, not the model's mistake.
			return problem.Problem{}, err
		}
		return prob, nil
	}
	if errors.Is(err, fs.ErrExist) {
		return problemParentFile, nil // MkdirAll met a file
	}
	return problem.Problem{}, err
}

// syncDir makes the rename durable.
func syncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

var problemTargetDir = problem.Must(CodeNotAFile, "the path names a directory")
