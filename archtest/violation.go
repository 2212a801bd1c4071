package archtest

import (
	"cmp"
	"strconv"
)

// The rules a Violation can name. doc.go describes each.
const (
	RuleKernelImports   = "kernel-imports"
	RuleKernelDeps      = "kernel-deps"
	RuleKernelWords     = "kernel-words"
	RuleKernelGlobals   = "kernel-globals"
	RuleLayerImports    = "layer-imports"
	RuleLayerUnknown    = "layer-unknown"
	RuleExceptionUnused = "exception-unused"
)

// Violation is one broken rule at one place.
type Violation struct {
	Rule string
	// File is slash-separated and relative to the module root: a .go file,
	// or a package folder for rules about whole packages.
	File string
	// Line is 1-based; zero when the rule is about a package or folder.
	Line int
	// Subject is what the rule is about: an import path, a dependency, a
	// forbidden word or a folder. Exceptions match on it.
	Subject string
	// Message says what is wrong and what would be allowed.
	Message string
}

// String formats v as "file:line: rule name: message", the form go vet and
// editors understand.
func (v Violation) String() string {
	loc := v.File
	if v.Line > 0 {
		loc += ":" + strconv.Itoa(v.Line)
	}
	return loc + ": rule " + v.Rule + ": " + v.Message
}

func compareViolations(a, b Violation) int {
	return cmp.Or(
		cmp.Compare(a.File, b.File),
		cmp.Compare(a.Line, b.Line),
		cmp.Compare(a.Rule, b.Rule),
		cmp.Compare(a.Subject, b.Subject),
		cmp.Compare(a.Message, b.Message),
	)
}
