package tools

import (
	"context"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/tool"
)

const textStatsSchema = `{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "The text to count."}
  },
  "required": ["text"],
  "additionalProperties": false
}`

// TextStats is the text.stats tool: it counts the words, lines and
// characters of a text. It touches nothing outside the call.
type TextStats struct {
	def tool.Definition
}

var _ tool.Tool = (*TextStats)(nil)

// NewTextStats returns text.stats. The error is for symmetry with the other
// constructors; it is nil unless the definition below is broken.
func NewTextStats() (*TextStats, error) {
	def, err := tool.NewDefinition(tool.DefinitionConfig{
		Name: NameTextStats,
		Description: `Count the words, lines and characters of a text. Returns {"words":N,"lines":N,"characters":N}; ` +
			"words are separated by white space, characters are Unicode code points, and a last line without a newline counts.",
		Schema: []byte(textStatsSchema),
		Effect: tool.ReadOnly,
		Replay: tool.Safe,
	})
	if err != nil {
		return nil, err
	}
	return &TextStats{def: def}, nil
}

// Definition returns the tool's definition.
func (t *TextStats) Definition() tool.Definition { return t.def }

// Execute counts the text.
func (t *TextStats) Execute(ctx context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
	if err := ctx.Err(); err != nil {
		return tool.Result{}, tool.Canceled(call.ID(), err)
	}
	var text string
	if e := decodeArgs(call.ArgumentsString(), stringArg{name: "text", required: true, dst: &text}); e != nil {
		return tool.NewProblemResult(call.ID(), invalidArguments(e), "")
	}
	s := Count(text)
	return tool.NewResult(call.ID(), `{"words":`+strconv.Itoa(s.Words)+`,"lines":`+strconv.Itoa(s.Lines)+
		`,"characters":`+strconv.Itoa(s.Characters)+`}`)
}

// Stats are the counts text.stats reports.
type Stats struct {
	Words      int // runs of non-space characters (unicode.IsSpace)
	Lines      int // newlines, plus one for a last line without one
	Characters int // Unicode code points
}

// Count counts s.
func Count(s string) Stats {
	lines := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		lines++
	}
	return Stats{Words: len(strings.Fields(s)), Lines: lines, Characters: utf8.RuneCountInString(s)}
}
