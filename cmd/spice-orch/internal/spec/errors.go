package spec

import (
	"errors"
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// ErrInvalid matches every *Error with errors.Is.
var ErrInvalid = errors.New("invalid spec")

// Error is a spec mistake: where it is and what is wrong. The message
// names the field and the rule, never the rejected value, so a key pasted
// into the wrong field is not echoed.
type Error struct {
	File string // as given to Decode; "" for none
	Line int    // 1-based; 0 when the mistake has no place (an empty file)
	// Column is the 1-based character of Line, for a mistake in the
	// text itself (a control character); 0 when the line is enough.
	Column int
	Field  string // the field path, e.g. "workers[1].max_turns"; "" for the file
	Msg    string
	Err    error // the *bound.Error behind Msg, if any
}

// Error returns "FILE:LINE: FIELD: MSG", leaving out what is unknown.
func (e *Error) Error() string {
	s := e.File
	if s == "" {
		s = "spec"
	}
	if e.Line > 0 {
		s += ":" + strconv.Itoa(e.Line)
		if e.Column > 0 {
			s += ":" + strconv.Itoa(e.Column)
		}
	}
	s += ": "
	if e.Field != "" {
		s += e.Field + ": "
	}
	return s + e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches ErrInvalid, and bound.ErrInvalid through Unwrap when the
// mistake came from a bound check.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// fromBound turns a *bound.Error into an *Error at line. The bound error's
// own field path replaces field when it is more precise.
func fromBound(file string, line int, field string, err error) *Error {
	var be *bound.Error
	if !errors.As(err, &be) {
		return &Error{File: file, Line: line, Field: field, Msg: "invalid value", Err: err}
	}
	msg := be.Rule.String()
	switch be.Rule {
	case bound.TooLarge, bound.TooMany:
		msg += " (" + strconv.Itoa(be.Got) + " > limit " + strconv.Itoa(be.Limit) + ")"
	}
	if be.Detail != "" {
		msg += ": " + be.Detail
	}
	if be.Field != "" {
		field = be.Field
	}
	return &Error{File: file, Line: line, Field: field, Msg: msg, Err: err}
}

// errWorkspaceOutside is the message for a workspace that is not a path
// inside the spec's folder.
const errWorkspaceOutside = "must be a relative path inside the spec's folder (give another directory with --workspace)"

// WorkspaceError is the *Error for s's workspace, which leads outside the
// spec's folder through a symbolic link (or cannot be resolved): the
// caller that looked at the files reports it at the workspace's line.
func WorkspaceError(s Spec, msg string) *Error {
	return &Error{File: s.File, Line: s.WorkspaceLine, Field: "workspace", Msg: msg}
}
