package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/mcplog"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/pluginlog"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// show prints a recorded pair, or, when id names no pair, a recorded run.
func show(ctx context.Context, env Env, st *store.Store, id string) error {
	rec, err := st.Pair(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		run, err := st.Run(ctx, id)
		if err != nil {
			return notFoundOr(id, err)
		}
		return showRun(env.Stdout, run)
	}
	if err != nil {
		return failed(err)
	}
	out := env.Stdout
	s := rec.Summary
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "pair\t%s\n", render.Field(s.ID))
	fmt.Fprintf(tw, "status\t%s\n", statusText(s.Status, s.Reason))
	fmt.Fprintf(tw, "workers\t%s\n", dash(strings.Join(s.Workers, ", ")))
	fmt.Fprintf(tw, "plan\t%s\n", dash(s.PlanID))
	fmt.Fprintf(tw, "started\t%s\n", when(s.Started))
	fmt.Fprintf(tw, "duration\t%s\n", span(s.Duration(), s.Ended))
	res := resumesOf(rec)
	if n := len(res.from); n > 0 {
		fmt.Fprintf(tw, "resumed\t%d time(s), last after sequence %d\n", n, res.from[n-1])
	}
	if err := tw.Flush(); err != nil {
		return failed(err)
	}
	if s.Status == store.StatusInterrupted {
		fmt.Fprintln(out, "\ninterrupted: the process running this pair ended before the pair's terminal was recorded.")
	}
	if len(rec.Runs) > 0 {
		fmt.Fprintln(out, "\nruns")
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, r := range rec.Runs {
			status := statusText(r.Status, problemText(r.ProblemCode, r.ProblemMessage))
			if by, ok := res.replaced[r.ID]; ok && r.Status == store.StatusInterrupted {
				status = "replaced by " + render.Field(by)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d turns\t%d in / %d out tokens\t%s\n", render.Field(r.ID), render.Field(r.Worker),
				status, r.Turns, r.InputTokens, r.OutputTokens, span(r.Duration(), r.Ended))
		}
		if err := tw.Flush(); err != nil {
			return failed(err)
		}
	}
	pevs, err := pluginlog.Read(ctx, st, s.ID)
	if err != nil {
		return failed(err)
	}
	showPlugins(out, pevs, rec.Runs)
	mevs, err := mcplog.Read(ctx, st, s.ID)
	if err != nil {
		return failed(err)
	}
	showMCP(out, mevs)
	uncertain(out, rec.Uncertain, res.accepted)
	fmt.Fprintln(out, "\ntimeline")
	var buf bytes.Buffer
	for _, en := range rec.Events {
		buf.Write(en.Event.AppendJSON(nil))
		buf.WriteByte('\n')
	}
	return renderLines(env, buf.Bytes())
}

func showRun(out io.Writer, rec store.RunRecord) error {
	s := rec.Summary
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s\n", render.Field(s.ID))
	if s.PairID != "" {
		fmt.Fprintf(tw, "pair\t%s (worker %s)\n", render.Field(s.PairID), render.Field(s.Worker))
	}
	fmt.Fprintf(tw, "status\t%s\n", statusText(s.Status, problemText(s.ProblemCode, s.ProblemMessage)))
	fmt.Fprintf(tw, "definition\t%s, model %s, plan %s\n", dash(s.Definition), dash(s.Model), dash(s.PlanID))
	fmt.Fprintf(tw, "started\t%s\n", when(s.Started))
	fmt.Fprintf(tw, "duration\t%s\n", span(s.Duration(), s.Ended))
	fmt.Fprintf(tw, "usage\t%d turns, %d in / %d out tokens\n", s.Turns, s.InputTokens, s.OutputTokens)
	if err := tw.Flush(); err != nil {
		return failed(err)
	}
	if len(rec.Calls) > 0 {
		fmt.Fprintln(out, "\ntool calls")
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, c := range rec.Calls {
			st := string(c.Status)
			if c.Outcome != "" {
				st += " (" + c.Outcome + ")"
			}
			fmt.Fprintf(tw, "  #%d\t%s\t%s\t%s\n", c.StartedSeq, render.Field(c.Name), dash(c.Effect), render.Field(st))
		}
		if err := tw.Flush(); err != nil {
			return failed(err)
		}
	}
	uncertain(out, rec.Uncertain, nil)
	if len(rec.Events) > 0 {
		fmt.Fprintln(out, "\nevents")
		for _, en := range rec.Events {
			fmt.Fprintln(out, "  "+render.Field(en.Summary()))
		}
	}
	return nil
}

// uncertain says which mutating calls may or may not have taken effect,
// and which of them a resume accepted as failed.
func uncertain(out io.Writer, calls []store.Call, accepted map[string]bool) {
	if len(calls) == 0 {
		return
	}
	fmt.Fprintln(out, "\nuncertain tool calls: their effect may or may not have happened, and nothing runs them again automatically")
	for _, c := range calls {
		how := callOutcome(c)
		if accepted[c.CallID] {
			how += "; a resume accepted it as failed"
		}
		fmt.Fprintf(out, "  %s: %s (call %s, %s), started at run sequence %d, %s\n", render.Field(c.RunID),
			render.Field(c.Name), render.Field(c.CallID), dash(c.Effect), c.StartedSeq, how)
	}
}

// resumes is what the pair.resumed events of a timeline say.
type resumes struct {
	from     []uint64          // each resume's from_seq, in order
	replaced map[string]string // a cut-off run -> the run that took its place
	accepted map[string]bool   // uncertain calls a resume accepted as failed
}

// resumesOf reads the resumes of a pair from its timeline. A resume that
// restarts a cut-off run names it; the run that took its place is the
// first run its worker started after that pair.resumed. A resume after
// the last completed run names none: a run of the pair's left without
// its end by then took no part, and the next run of its worker replaced
// it.
func resumesOf(rec store.PairRecord) resumes {
	res := resumes{replaced: map[string]string{}, accepted: map[string]bool{}}
	started := map[string]bool{}   // runs whose run.started the timeline holds so far
	pending := map[string]string{} // worker -> the run waiting for its replacement
	for _, en := range rec.Events {
		kind := en.Event.Kind()
		if en.Relayed && kind == "run.started" && en.RunID != "" {
			if old, ok := pending[en.Worker]; ok && old != en.RunID {
				res.replaced[old] = en.RunID
				delete(pending, en.Worker)
			}
			started[en.RunID] = true
			continue
		}
		if kind != orchestrator.KindResumed {
			continue
		}
		raw, ok := en.Event.Payload().(eventlog.Raw)
		if !ok {
			continue
		}
		var p orchestrator.Resumed
		if json.Unmarshal(raw.Bytes(), &p) != nil {
			continue
		}
		res.from = append(res.from, p.FromSeq)
		for _, c := range p.Accepted {
			res.accepted[string(c)] = true
		}
		if p.RunID != "" {
			pending[p.Worker] = string(p.RunID)
			continue
		}
		for _, r := range rec.Runs {
			if r.Status == store.StatusInterrupted && started[r.ID] {
				if _, done := res.replaced[r.ID]; !done {
					pending[r.Worker] = r.ID
				}
			}
		}
	}
	return res
}

func callOutcome(c store.Call) string {
	if c.Status == store.CallUncertain {
		return "no outcome recorded"
	}
	return string(c.Status) + " with an uncertain outcome"
}

func statusText(s store.Status, detail string) string {
	if detail == "" {
		return render.Field(string(s))
	}
	return render.Field(string(s) + " (" + detail + ")")
}

func problemText(code, msg string) string {
	if code == "" {
		return ""
	}
	if msg == "" {
		return code
	}
	return code + ": " + msg
}
