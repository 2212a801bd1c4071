package boundary

import (
	"fmt"
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"unicode"
)

// Forms maps every form of a set of forbidden words (the word, its plural
// and a few derived forms) to the word itself.
type Forms map[string]string

// NewForms returns the forms of words: each word, its plural and, for the
// forbidden words that have them, derived forms ("children",
// "delegation", "orchestration", "pairing").
func NewForms(words []string) Forms {
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

// SplitWords splits s into lower-case words: at every character that is not
// a letter or digit, between a lower-case and an upper-case letter, between
// letters and digits, and before the last upper-case letter of an acronym
// that starts a new word ("HTTPServer" is "http", "server").
func SplitWords(s string) []string {
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

// Match is one forbidden word found in a text, and the form it had.
type Match struct{ Word, Form string }

// In returns the forbidden words in text, each once. Two adjacent words
// are also tried joined, so "HandOff" and "sub_agent" are found.
func (fs Forms) In(text string) []Match {
	var out []Match
	add := func(form string) {
		w, ok := fs[form]
		if !ok {
			return
		}
		for _, m := range out {
			if m.Word == w {
				return
			}
		}
		out = append(out, Match{Word: w, Form: form})
	}
	words := SplitWords(text)
	for i, w := range words {
		add(w)
		if i+1 < len(words) {
			add(w + words[i+1])
		}
	}
	return out
}

// Finding is one forbidden word in a file: where, in what kind of text
// ("type name", "string", "declaration comment", ...), and the text.
type Finding struct {
	Pos   token.Pos
	What  string
	Text  string
	Match Match
}

// Message says what was found, naming the text when it is short.
func (f Finding) Message() string {
	msg := fmt.Sprintf("%s %q contains the forbidden word %q", f.What, f.Text, f.Match.Word)
	if len(f.Text) > 60 { // say where, not the whole text
		msg = fmt.Sprintf("a %s contains the forbidden word %q", f.What, f.Match.Word)
	}
	if f.Match.Form != f.Match.Word {
		msg += fmt.Sprintf(" (as %q)", f.Match.Form)
	}
	return msg
}

// File returns the forbidden words in the names f declares, its string
// literals and the comments of its declarations, in the order they appear.
// The package comment and comments inside function bodies are not
// checked: the first says what the package must not know, the second
// explain code. f must have been parsed with parser.ParseComments.
func (fs Forms) File(f *ast.File) []Finding {
	var out []Finding
	check := func(pos token.Pos, what, text string) {
		for _, m := range fs.In(text) {
			out = append(out, Finding{Pos: pos, What: what, Text: text, Match: m})
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
	return out
}

// ForbiddenWords returns the words the kernel must not use, the
// multi-agent concepts it must never learn; archtest's kernel-words rule checks them.
// Plurals and derived forms are matched too (NewForms).
func ForbiddenWords() []string {
	return []string{
		"parent", "child", "subagent", "swarm", "worker",
		"orchestrator", "scheduler", "delegate", "handoff", "pair",
	}
}
