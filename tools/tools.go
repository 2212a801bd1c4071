package tools

import (
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Tool names.
const (
	NameFSRead    = "fs.read"
	NameFSWrite   = "fs.write"
	NameTextStats = "text.stats"
)

// Problem codes of the model-visible problem results.
const (
	CodeInvalidArguments = "invalid_arguments"      // the arguments do not fit the schema
	CodeOutsideWorkspace = "path_outside_workspace" // absolute, escaping, or through a link leading out
	CodeNotFound         = "not_found"              // nothing at the path (or a dangling link)
	CodeNotAFile         = "not_a_file"             // a directory or another non-regular file
	CodeNotADirectory    = "not_a_directory"        // a file where the path needs a directory
	CodeTooLarge         = "too_large"              // the file or content exceeds the tool's limit
	CodeNotText          = "not_text"               // the file is not valid UTF-8 text
)

// Problem codes of execution errors (infrastructure failures).
const (
	CodeIOError        = "io_error"        // definitive: nothing was changed
	CodeWriteUncertain = "write_uncertain" // uncertain: the file may have been replaced
)

// Defaults and ceilings of Config.
const (
	// DefaultMaxReadBytes is the largest file fs.read returns: a tool
	// result can hold no more.
	DefaultMaxReadBytes = bound.MaxToolResultBytes
	// DefaultMaxWriteBytes is the largest content fs.write accepts: a
	// call's arguments can carry no more.
	DefaultMaxWriteBytes = bound.MaxToolArgumentsBytes
)

// Config configures the file tools.
type Config struct {
	// Root is the workspace directory; it must exist. It is resolved to
	// an absolute path without symbolic links once, at construction.
	Root string
	// MaxReadBytes is the largest file fs.read returns:
	// 1..bound.MaxToolResultBytes, default DefaultMaxReadBytes.
	MaxReadBytes int
	// MaxWriteBytes is the largest content fs.write writes:
	// 1..bound.MaxToolArgumentsBytes, default DefaultMaxWriteBytes.
	MaxWriteBytes int
	// Journal is a directory where fs.write records the idempotency keys
	// of the writes it made (one small file per key), so that a call
	// repeated with the same key, in this process or a later one, is a
	// no-op that returns the first result. It must exist, and belongs
	// outside Root, where no tool can reach it. Empty keeps the keys in
	// memory for the life of the tool (at most MaxRememberedKeys).
	Journal string
}

func (c Config) normalize() (Config, workspace, error) {
	ws, err := openWorkspace(c.Root)
	if err != nil {
		return c, ws, err
	}
	journal, err := openJournal(c.Journal)
	if err != nil {
		return c, ws, bound.Malformedf("tools.journal", "must be an existing directory")
	}
	c.Journal = journal
	if c.MaxReadBytes == 0 {
		c.MaxReadBytes = DefaultMaxReadBytes
	}
	if c.MaxWriteBytes == 0 {
		c.MaxWriteBytes = DefaultMaxWriteBytes
	}
	if c.MaxReadBytes < 0 {
		return c, ws, bound.Malformedf("tools.max_read_bytes", "must not be negative")
	}
	if err := bound.Bytes("tools.max_read_bytes", c.MaxReadBytes, bound.MaxToolResultBytes); err != nil {
		return c, ws, err
	}
	if c.MaxWriteBytes < 0 {
		return c, ws, bound.Malformedf("tools.max_write_bytes", "must not be negative")
	}
	if err := bound.Bytes("tools.max_write_bytes", c.MaxWriteBytes, bound.MaxToolArgumentsBytes); err != nil {
		return c, ws, err
	}
	return c, ws, nil
}

// New returns fs.read, fs.write and text.stats, in name order, the first two
// confined to cfg.Root. Every error is a *bound.Error.
func New(cfg Config) ([]tool.Tool, error) {
	cfg, ws, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	r, err := newFSRead(cfg, ws)
	if err != nil {
		return nil, err
	}
	w, err := newFSWrite(cfg, ws)
	if err != nil {
		return nil, err
	}
	s, err := NewTextStats()
	if err != nil {
		return nil, err
	}
	return []tool.Tool{r, w, s}, nil
}

// invalidArguments is the problem for an argument mistake.
func invalidArguments(e *argError) problem.Problem {
	p, err := problem.New(CodeInvalidArguments, e.msg)
	if err != nil {
		return problem.Must(CodeInvalidArguments, "the arguments do not match the schema")
	}
	return p
}

var (
	problemReadIO    = problem.Must(CodeIOError, "the file system failed to read the file")
	problemWriteIO   = problem.Must(CodeIOError, "the file system failed before the file was replaced; it is unchanged")
	problemUncertain = problem.Must(CodeWriteUncertain, "the file system failed while replacing the file; it may hold the old or the new content")
)
