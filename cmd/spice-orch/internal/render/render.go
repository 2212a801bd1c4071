package render

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// Options configures a Renderer.
type Options struct {
	// Color adds ANSI colors (for a terminal that has not set NO_COLOR).
	Color bool
}

// Summary is what the timeline said about the pair, complete once its
// terminal has been rendered.
type Summary struct {
	PairID, PlanID, Pattern string
	Workers                 [2]string
	// Kind is the terminal kind (pair.completed, pair.failed,
	// pair.cancelled); "" before the terminal.
	Kind, Reason, Limit       string
	Rounds, Runs              int
	InputTokens, OutputTokens int64
	ToolCalls                 int64
	Started, Ended            time.Time
	Events                    int
	LastSeq                   uint64
}

// Duration is the time from pair.started to the terminal.
func (s Summary) Duration() time.Duration {
	if s.Started.IsZero() || s.Ended.IsZero() {
		return 0
	}
	return s.Ended.Sub(s.Started)
}

// Renderer writes a readable timeline, one event at a time. It is not safe
// for concurrent use.
type Renderer struct {
	w   io.Writer
	o   Options
	buf bytes.Buffer
	sum Summary
	pad int // width of the worker column
	// text is the worker whose answer is being streamed; midLine says the
	// last delta did not end its line.
	text    string
	midLine bool
}

// New returns a renderer that writes to w.
func New(w io.Writer, o Options) *Renderer {
	return &Renderer{w: w, o: o, pad: len("reviewer")}
}

// Summary returns what the rendered events said so far.
func (r *Renderer) Summary() Summary { return r.sum }

// Line renders one canonical event line (a trailing newline is ignored).
// A line that does not decode is an error and renders nothing.
func (r *Renderer) Line(line []byte) error {
	en, err := decode(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil {
		return err
	}
	r.buf.Reset()
	r.sum.Events++
	r.sum.LastSeq = en.seq
	switch p := en.payload.(type) {
	case orchestrator.Started:
		r.pairStarted(en, p)
	case orchestrator.HandedOff:
		r.endText()
		h := p
		cut := ""
		if h.Cut {
			cut = r.paint(yellow, " (cut from "+strconv.Itoa(h.AnswerBytes)+" bytes)")
		}
		r.prefix("handoff")
		fmt.Fprintf(&r.buf, "%s -> %s, round %d: %d bytes%s, sha256 %s\n",
			r.paint(bold, Field(h.From)), r.paint(bold, Field(h.To)), h.Round, h.Bytes, cut, hex.EncodeToString(h.SHA256[:6]))
	case orchestrator.FinalAnswer:
		r.endText()
		why := p.Reason.String()
		if p.Limit != 0 {
			why += " (" + p.Limit.String() + ")"
		}
		r.prefix("final")
		fmt.Fprintf(&r.buf, "%s gives a final answer without tools at the limit: %s", r.paint(bold, Field(p.Worker)), Field(why))
		if p.Tokens > 0 {
			fmt.Fprintf(&r.buf, ", within %d tokens", p.Tokens)
		}
		r.buf.WriteByte('\n')
	case orchestrator.Resumed:
		r.endText()
		if r.sum.PairID == "" {
			r.sum.PairID, r.sum.Started = p.PairID, en.time
		}
		from := "after its last completed run"
		if p.RunID != "" {
			from = fmt.Sprintf("restarting %s's run %s (%s and %s served from the record)",
				Field(p.Worker), Field(string(p.RunID)), plural(p.ServedModel, "model answer"), plural(p.ServedTools, "tool outcome"))
		}
		fmt.Fprintf(&r.buf, "%s %s after sequence %d: %s\n", r.paint(bold, "pair"), r.paint(cyan, "resumed"), p.FromSeq, from)
		for _, c := range p.Accepted {
			fmt.Fprintf(&r.buf, "  call %s accepted as failed: not run again\n", Field(string(c)))
		}
	case orchestrator.Ended:
		r.pairEnded(en, p)
	case orchestrator.Relayed:
		r.relayed(en, p)
	}
	_, err = r.w.Write(r.buf.Bytes())
	return err
}

func (r *Renderer) pairStarted(en entry, s orchestrator.Started) {
	r.sum.PairID, r.sum.PlanID, r.sum.Pattern = s.PairID, s.PlanID, s.Pattern
	r.sum.Workers = [2]string{s.First, s.Second}
	r.sum.Started = en.time
	r.pad = max(len("handoff"), len(s.First), len(s.Second))
	pattern := strings.ReplaceAll(s.Pattern, "_", " ")
	fmt.Fprintf(&r.buf, "%s %s: %s, %s then %s, plan %s\n", r.paint(bold, "pair"), Field(s.PairID), Field(pattern),
		r.paint(cyan, Field(s.First)), r.paint(magenta, Field(s.Second)), Field(s.PlanID))
}

func (r *Renderer) pairEnded(en entry, e orchestrator.Ended) {
	r.endText()
	limit := ""
	if e.Limit != 0 {
		limit = e.Limit.String()
	}
	r.sum.Kind, r.sum.Reason, r.sum.Limit = en.kind, e.Reason.String(), limit
	r.sum.Rounds, r.sum.Runs, r.sum.ToolCalls = e.Rounds, e.Runs, e.ToolCalls
	r.sum.InputTokens, r.sum.OutputTokens = e.InputTokens, e.OutputTokens
	r.sum.Ended = en.time
	color := green
	switch en.kind {
	case orchestrator.KindFailed:
		color = red
	case orchestrator.KindCancelled:
		color = yellow
	}
	reason := e.Reason.String()
	if limit != "" {
		reason += " (" + limit + ")"
	}
	fmt.Fprintf(&r.buf, "%s %s: %s\n", r.paint(bold, "pair"), r.paint(color, strings.TrimPrefix(en.kind, orchestrator.KindPrefix)), Field(reason))
	if e.Worker != "" || !e.Problem.IsZero() {
		r.buf.WriteString("  ")
		if e.Worker != "" {
			fmt.Fprintf(&r.buf, "worker %s", Field(e.Worker))
			if e.RunID != "" {
				fmt.Fprintf(&r.buf, " (run %s)", Field(string(e.RunID)))
			}
		}
		if !e.Problem.IsZero() {
			fmt.Fprintf(&r.buf, " problem %s: %s", Field(e.Problem.Code()), oneLine(e.Problem.Message(), 160))
		}
		r.buf.WriteByte('\n')
	}
	if e.FinalAnswer != "" {
		fmt.Fprintf(&r.buf, "  final answer by %s, given at the limit\n", Field(e.FinalAnswer))
	}
	fmt.Fprintf(&r.buf, "  %s, %s, %s, %d in / %d out tokens, %s\n",
		plural(e.Rounds, "round"), plural(e.Runs, "run"), plural(int(e.ToolCalls), "tool call"),
		e.InputTokens, e.OutputTokens, FormatDuration(r.sum.Duration()))
}

func (r *Renderer) relayed(en entry, rl orchestrator.Relayed) {
	worker := rl.Worker()
	if en.kind != event.KindModelTextDelta {
		r.endText()
	}
	switch p := en.run().(type) {
	case event.RunStarted:
		r.prefix(worker)
		fmt.Fprintf(&r.buf, "run %s started, model %s\n", Field(string(p.RunID)), Field(p.Model))
	case event.RunCompleted:
		r.prefix(worker)
		fmt.Fprintf(&r.buf, "run %s: %s, %d in / %d out tokens\n", r.paint(green, "completed"),
			plural(p.Turns, "turn"), p.InputTokens, p.OutputTokens)
	case event.RunFailed:
		r.prefix(worker)
		fmt.Fprintf(&r.buf, "run %s: %s: %s\n", r.paint(red, "failed"), Field(p.Problem.Code()), oneLine(p.Problem.Message(), 160))
	case event.RunCancelled:
		r.prefix(worker)
		fmt.Fprintf(&r.buf, "run %s after %s\n", r.paint(yellow, "cancelled"), plural(p.Turns, "turn"))
	case event.TurnStarted:
		r.prefix(worker)
		fmt.Fprintf(&r.buf, "turn %d\n", p.Index)
	case event.TurnFailed:
		r.prefix(worker)
		fmt.Fprintf(&r.buf, "turn %d %s: %s\n", p.Index, r.paint(red, "failed"), Field(p.Problem.Code()))
	case event.TurnCancelled:
		r.prefix(worker)
		fmt.Fprintf(&r.buf, "turn %d %s\n", p.Index, r.paint(yellow, "cancelled"))
	case event.ModelTextDelta:
		r.delta(worker, p.Text)
	case event.ModelFailed:
		r.prefix(worker)
		fmt.Fprintf(&r.buf, "model %s: %s: %s\n", r.paint(red, "failed"), Field(p.Problem.Code()), oneLine(p.Problem.Message(), 160))
	case event.ModelCancelled:
		r.prefix(worker)
		fmt.Fprintf(&r.buf, "model %s\n", r.paint(yellow, "cancelled"))
	case event.ToolStarted:
		r.sum.ToolCalls++
		r.prefix(worker)
		effect := strings.ReplaceAll(p.Effect, "_", "-")
		if effect == "" {
			effect = "not in the plan"
		}
		fmt.Fprintf(&r.buf, "tool %s (%s)\n", r.paint(bold, Field(p.Name)), Field(effect))
	case event.ToolProgress:
		r.prefix(worker)
		fmt.Fprintf(&r.buf, "  ... %s\n", oneLine(p.Message, 120))
	case event.ToolCompleted:
		r.prefix(worker)
		if !p.Problem.IsZero() {
			fmt.Fprintf(&r.buf, "  -> %s %s: %s\n", r.paint(yellow, "problem"), Field(p.Problem.Code()), oneLine(p.Problem.Message(), 120))
		} else {
			fmt.Fprintf(&r.buf, "  -> %s %s\n", r.paint(green, "ok"), oneLine(p.Content, 100))
		}
	case event.ToolFailed:
		r.prefix(worker)
		fmt.Fprintf(&r.buf, "  -> %s (%s) %s: %s\n", r.paint(red, "failed"), Field(p.Outcome), Field(p.Problem.Code()), oneLine(p.Problem.Message(), 120))
	case event.ToolCancelled:
		r.prefix(worker)
		fmt.Fprintf(&r.buf, "  -> %s (%s)\n", r.paint(yellow, "cancelled"), Field(p.Outcome))
	case event.ModelStarted, event.ModelCompleted, event.TurnCompleted:
		// Turns, answers and run totals say what these would.
	default: // a kind this build does not know
		r.prefix(worker)
		fmt.Fprintf(&r.buf, "%s\n", Field(en.kind))
	}
}

// delta streams answer text, each line under the worker's prefix.
func (r *Renderer) delta(worker, text string) {
	if r.text != worker {
		r.endText()
		r.text = worker
	}
	for text != "" {
		if !r.midLine {
			r.prefix(worker)
			r.buf.WriteString(r.paint(dim, "| "))
			r.midLine = true
		}
		line, rest, nl := strings.Cut(text, "\n")
		r.buf.WriteString(Text(line))
		if nl {
			r.buf.WriteByte('\n')
			r.midLine = false
		}
		text = rest
	}
}

// endText ends a streamed answer's last line.
func (r *Renderer) endText() {
	if r.midLine {
		r.buf.WriteByte('\n')
	}
	r.midLine, r.text = false, ""
}

func (r *Renderer) prefix(who string) {
	c := cyan
	switch who {
	case r.sum.Workers[1]:
		c = magenta
	case "handoff":
		c = blue
	}
	label := "[" + Field(who) + "]"
	r.buf.WriteString(r.paint(c, label))
	r.buf.WriteString(strings.Repeat(" ", max(1, r.pad+3-len(label))))
}

// ANSI styles.
const (
	bold    = "1"
	dim     = "2"
	red     = "31"
	green   = "32"
	yellow  = "33"
	blue    = "34"
	magenta = "35"
	cyan    = "36"
)

func (r *Renderer) paint(style, s string) string {
	if !r.o.Color || s == "" {
		return s
	}
	return "\x1b[" + style + "m" + s + "\x1b[0m"
}

// oneLine shows s on one line of at most n runes: newlines and tabs become
// spaces, a longer text ends with "...", and control characters are shown
// escaped (Field).
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return Field(s)
	}
	cut := 0
	for i := range s {
		if n == 0 {
			cut = i
			break
		}
		n--
	}
	return Field(s[:cut]) + "..."
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// FormatDuration shows d the way a person reads a run's length: "850ms",
// "2.4s", "3m05s".
func FormatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
