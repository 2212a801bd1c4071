package tools

import (
	"context"
	"io"
	"os"
	"strconv"
	"syscall"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

const fsReadSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "The file's path relative to the workspace root, with / separators, e.g. \"notes/draft.md\"."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

// FSRead is the fs.read tool: it returns the content of one UTF-8 text file
// inside the workspace. It is immutable and safe for concurrent use.
type FSRead struct {
	def tool.Definition
	ws  workspace
	max int
}

var _ tool.Tool = (*FSRead)(nil)

// NewFSRead returns fs.read confined to cfg.Root.
func NewFSRead(cfg Config) (*FSRead, error) {
	cfg, ws, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	return newFSRead(cfg, ws)
}

func newFSRead(cfg Config, ws workspace) (*FSRead, error) {
	def, err := tool.NewDefinition(tool.DefinitionConfig{
		Name: NameFSRead,
		Description: "Read a UTF-8 text file inside the workspace and return its content. " +
			"Files larger than " + strconv.Itoa(cfg.MaxReadBytes) + " bytes are refused.",
		Schema:       []byte(fsReadSchema),
		Effect:       tool.ReadOnly,
		Replay:       tool.Safe,
		Capabilities: []tool.Capability{tool.FilesystemRead},
	})
	if err != nil {
		return nil, err
	}
	return &FSRead{def: def, ws: ws, max: cfg.MaxReadBytes}, nil
}

// Definition returns the tool's definition.
func (t *FSRead) Definition() tool.Definition { return t.def }

// Execute reads the file. Missing files, directories, files over the limit
// and binary files are problem results; only an I/O failure is an
// execution error, always definitive since reading changes nothing.
func (t *FSRead) Execute(ctx context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
	if err := ctx.Err(); err != nil {
		return tool.Result{}, tool.Canceled(call.ID(), err)
	}
	var p string
	if e := decodeArgs(call.ArgumentsString(), stringArg{name: "path", required: true, dst: &p}); e != nil {
		return tool.NewProblemResult(call.ID(), invalidArguments(e), "")
	}
	rel, prob, err := t.ws.target(p)
	if err != nil {
		return tool.Result{}, tool.Fail(call.ID(), problemReadIO)
	}
	if !prob.IsZero() {
		return tool.NewProblemResult(call.ID(), prob, "")
	}
	content, prob, err := t.read(rel)
	switch {
	case err != nil:
		return tool.Result{}, tool.Fail(call.ID(), problemReadIO)
	case !prob.IsZero():
		return tool.NewProblemResult(call.ID(), prob, "")
	}
	return tool.NewResult(call.ID(), content)
}

func (t *FSRead) read(rel string) (string, problem.Problem, error) {
	root, err := os.OpenRoot(t.ws.root)
	if err != nil {
		return "", problem.Problem{}, err
	}
	defer root.Close()
	// O_NONBLOCK: opening a named pipe must not wait for a writer; the
	// type check below refuses it.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if prob := t.ws.explain(rel, err); !prob.IsZero() {
			return "", prob, nil
		}
		return "", problem.Problem{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", problem.Problem{}, err
	}
	if !fi.Mode().IsRegular() {
		return "", problemNotRegular, nil
	}
	// A hard link has no target to resolve: the same file may have a
	// name outside the workspace, so a file with more than one name is
	// refused. (fs.write replaces files by rename and so never writes
	// through a hard link.)
	if links(fi) > 1 {
		return "", problemHardLinked, nil
	}
	if fi.Size() > int64(t.max) {
		return "", t.tooLarge(), nil
	}
	// The file may grow after Stat: read one byte past the limit to see.
	data, err := io.ReadAll(io.LimitReader(f, int64(t.max)+1))
	if err != nil {
		return "", problem.Problem{}, err
	}
	if len(data) > t.max {
		return "", t.tooLarge(), nil
	}
	if !utf8.Valid(data) {
		return "", problemNotText, nil
	}
	return string(data), problem.Problem{}, nil
}

func (t *FSRead) tooLarge() problem.Problem {
	return problem.Must(CodeTooLarge, "the file is larger than "+strconv.Itoa(t.max)+" bytes")
}

var (
	problemNotRegular = problem.Must(CodeNotAFile, "the path names a directory or another kind of non-regular file")
	problemNotText    = problem.Must(CodeNotText, "the file is not UTF-8 text")
	problemHardLinked = problem.Must(CodeOutsideWorkspace, "the file has more than one hard link, so it may be shared with a file outside the workspace")
)
