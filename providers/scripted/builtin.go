package scripted

import (
	_ "embed"
	"slices"
)

// The built-in writer/reviewer scripts run offline against real compiled
// tools. The host wires tools with these names; this package only names
// them.
const (
	WriterName   = "writer"   // the built-in writer script's name
	ReviewerName = "reviewer" // the built-in reviewer script's name

	// DoneMarker is what the reviewer's approving answer contains, and
	// nothing else the built-in scripts say does.
	DoneMarker = "APPROVED"
	// FeedbackMarker selects the writer's revision steps. The reviewer's
	// rejection contains it, so the writer revises whether the host passes
	// the rejection on verbatim or under a "Reviewer feedback" heading.
	FeedbackMarker = "Reviewer feedback"
	// RevisionMarker selects the reviewer's second-round steps; the
	// writer's revised answer starts with it.
	RevisionMarker = "Revised draft"
	// DraftPath is the workspace-relative file the writer writes and the
	// reviewer reads.
	DraftPath = "draft.md"
)

// The built-in scripts, as a JSON object {"writer": Script, "reviewer":
// Script}.
//
//go:embed builtin/writer_reviewer.json
var builtinJSON []byte

type builtinScripts struct {
	Writer   Script `json:"writer"`
	Reviewer Script `json:"reviewer"`
}

// Builtin returns fresh copies of the built-in writer and reviewer scripts.
//
// The writer calls fs.write to write DraftPath, then answers with the
// draft. Given an input containing FeedbackMarker it writes a revised draft
// and answers starting with RevisionMarker. The reviewer calls fs.read on
// DraftPath and text.stats on the draft, then answers "REJECTED: Reviewer
// feedback: ..." to a first draft and an answer containing DoneMarker to a
// revised one.
func Builtin() (writer, reviewer Script) {
	var b builtinScripts
	// The embedded file is part of the binary and tested; a decoding error
	// is a build mistake, not bad input.
	if err := decodeStrict(builtinJSON, &b, "builtin"); err != nil {
		panic("scripted: built-in scripts: " + err.Error())
	}
	return b.Writer, b.Reviewer
}

// BuiltinJSON returns a copy of the built-in scripts' JSON source.
func BuiltinJSON() []byte { return slices.Clone(builtinJSON) }

// BuiltinToolNames returns the tool names the built-in scripts call,
// sorted: "fs.read", "fs.write", "text.stats".
func BuiltinToolNames() []string {
	w, r := Builtin()
	names := append(w.ToolNames(), r.ToolNames()...)
	slices.Sort(names)
	return slices.Compact(names)
}
