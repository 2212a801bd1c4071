package archtest

import (
	"fmt"
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"unicode"
)

// wordForms maps every form of the forbidden words (the word, its plural
// and a few derived forms) to the word itself.
func wordForms(words []string) map[string]string {
	derived := map[string][]string{
		"child":        {"children"},
		"delegate":     {"delegated", "delegating", "delegation", "delegations"},
		"orchestrator": {"orchestrate", "orchestrated", "orchestrating", "orchestration"},
		"pair":         {"paired", "pairing", "pairings"},
	}
	forms := make(map[string]string)
	for _, w := range words {
		w = strings.ToLower(w)
		forms[w] = w
		forms[w+"s"] = w
		for _, f := range derived[w] {
			forms[f] = w
		}
	}
	return forms
}

// splitWords splits s into lower-case words: at every character that is not
// a letter or digit, between a lower-case and an upper-case letter, between
// letters and digits, and before the last upper-case letter of an acronym
// that starts a new word ("HTTPServer" is "http", "server").
func splitWords(s string) []string {
	rs := []rune(s)
	var words []string
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			words = append(words, strings.ToLower(string(rs[start:end])))
		}
		start = -1
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev := rs[i-1]
		if unicode.IsLower(prev) && unicode.IsUpper(r) ||
			unicode.IsDigit(prev) != unicode.IsDigit(r) ||
			unicode.IsUpper(prev) && unicode.IsUpper(r) && i+1 < len(rs) && unicode.IsLower(rs[i+1]) {
			flush(i)
			start = i
		}
	}
	flush(len(rs))
	return words
}

// wordMatch is one forbidden word found in a text, and the form it had.
type wordMatch struct{ word, form string }

// forbiddenIn returns the forbidden words in text, each once. Two adjacent
// words are also tried joined, so "HandOff" and "sub_agent" are found.
func (c *checker) forbiddenIn(text string) []wordMatch {
	var out []wordMatch
	add := func(form string) {
		w, ok := c.forms[form]
		if !ok {
			return
		}
		for _, m := range out {
			if m.word == w {
				return
			}
		}
		out = append(out, wordMatch{word: w, form: form})
	}
	words := splitWords(text)
	for i, w := range words {
		add(w)
		if i+1 < len(words) {
			add(w + words[i+1])
		}
	}
	return out
}

// checkWords reports forbidden words in the names a kernel file declares,
// its string literals and the comments of its declarations. The package
// comment and comments inside function bodies are not checked: the first
// says what the package must not know, the second explain code.
func (c *checker) checkWords(file string, f *ast.File) {
	check := func(pos token.Pos, what, text string) {
		for _, m := range c.forbiddenIn(text) {
			msg := fmt.Sprintf("%s %q contains the forbidden word %q", what, text, m.word)
			if len(text) > 60 { // say where, not the whole text
				msg = fmt.Sprintf("a %s contains the forbidden word %q", what, m.word)
			}
			if m.form != m.word {
				msg += fmt.Sprintf(" (as %q)", m.form)
			}
			c.report(Violation{Rule: RuleKernelWords, File: file, Line: c.lineOf(pos), Subject: m.word, Message: msg})
		}
	}
	name := func(id *ast.Ident, what string) {
		if id != nil && id.Name != "_" {
			check(id.Pos(), what+" name", id.Name)
		}
	}
	comment := func(g *ast.CommentGroup) {
		if g == nil {
			return
		}
		for _, cm := range g.List {
			check(cm.Pos(), "declaration comment", cm.Text)
		}
	}
	// A field list's role is known at its owner, which ast.Inspect visits
	// first; remember it for the fields.
	role := make(map[*ast.FieldList]string)
	label := func(l *ast.FieldList, what string) {
		if l != nil {
			role[l] = what
		}
	}
	var stack []ast.Node // the nodes being visited, innermost last
	tags := make(map[*ast.BasicLit]bool)

	name(f.Name, "package")
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case nil: // Inspect is done with the innermost node
			stack = stack[:len(stack)-1]
			return true
		case *ast.CommentGroup:
			return false // only the comments of declarations, below
		case *ast.ImportSpec:
			name(n.Name, "import")
			return false // the path is checked by kernel-imports
		case *ast.GenDecl:
			comment(n.Doc)
			what := "variable"
			if n.Tok == token.CONST {
				what = "constant"
			}
			for _, s := range n.Specs {
				if vs, ok := s.(*ast.ValueSpec); ok {
					for _, id := range vs.Names {
						name(id, what)
					}
				}
			}
		case *ast.ValueSpec:
			comment(n.Doc)
			comment(n.Comment)
		case *ast.TypeSpec:
			comment(n.Doc)
			comment(n.Comment)
			name(n.Name, "type")
			label(n.TypeParams, "type parameter")
		case *ast.FuncDecl:
			comment(n.Doc)
			if n.Recv != nil {
				name(n.Name, "method")
				label(n.Recv, "receiver")
			} else {
				name(n.Name, "function")
			}
		case *ast.FuncType:
			label(n.TypeParams, "type parameter")
			label(n.Params, "parameter")
			label(n.Results, "result")
		case *ast.StructType:
			label(n.Fields, "field")
		case *ast.InterfaceType:
			label(n.Methods, "method")
		case *ast.Field:
			comment(n.Doc)
			comment(n.Comment)
			what := "field"
			if l, ok := stack[len(stack)-1].(*ast.FieldList); ok && role[l] != "" {
				what = role[l]
			}
			for _, id := range n.Names {
				name(id, what)
			}
			if n.Tag != nil {
				tags[n.Tag] = true
			}
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				for _, e := range n.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						name(id, "variable")
					}
				}
			}
		case *ast.RangeStmt:
			if n.Tok == token.DEFINE {
				for _, e := range []ast.Expr{n.Key, n.Value} {
					if id, ok := e.(*ast.Ident); ok {
						name(id, "variable")
					}
				}
			}
		case *ast.LabeledStmt:
			name(n.Label, "label")
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				what := "string"
				if tags[n] {
					what = "struct tag"
				}
				if s, err := strconv.Unquote(n.Value); err == nil {
					check(n.Pos(), what, s)
				}
			}
		}
		stack = append(stack, n)
		return true
	})
}
