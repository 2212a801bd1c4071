package archtest

import (
	"go/ast"

	"github.com/spice-orch/spice-orch/proof/boundary"
)

// The word checker lives in proof/boundary, so that the boundary proof
// runs the same code as this package; these adapt it to the checker.

// wordForms maps every form of the forbidden words (the word, its plural
// and a few derived forms) to the word itself.
func wordForms(words []string) map[string]string { return boundary.NewForms(words) }

// splitWords splits s into lower-case words (boundary.SplitWords).
func splitWords(s string) []string { return boundary.SplitWords(s) }

// wordMatch is one forbidden word found in a text, and the form it had.
type wordMatch struct{ word, form string }

// forbiddenIn returns the forbidden words in text, each once.
func (c *checker) forbiddenIn(text string) []wordMatch {
	var out []wordMatch
	for _, m := range boundary.Forms(c.forms).In(text) {
		out = append(out, wordMatch{word: m.Word, form: m.Form})
	}
	return out
}

// checkWords reports forbidden words in the names a kernel file declares,
// its string literals and the comments of its declarations
// (boundary.Forms.File says which).
func (c *checker) checkWords(file string, f *ast.File) {
	for _, x := range boundary.Forms(c.forms).File(f) {
		c.report(Violation{Rule: RuleKernelWords, File: file, Line: c.lineOf(x.Pos), Subject: x.Match.Word, Message: x.Message()})
	}
}
