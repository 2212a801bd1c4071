package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// Bounds of an --approve-from file.
const (
	maxAnswersBytes = 1 << 20
	maxAnswers      = 10000
)

// approval is what `run` needs for approvals: the pair's config, the
// broker its engines ask, and what answers it.
type approval struct {
	cfg    orchestrator.ApprovalConfig
	broker *orchestrator.Approvals
	// start begins answering from the terminal; nil for a file or no policy.
	start func(ctx context.Context)
}

// setUpApproval reads the approval flags and the spec's approve field. A
// policy other than never needs someone to answer: a person on the
// terminal, or the answers of --approve-from; with --json or without a
// terminal only the file can answer, and without it `run` refuses to
// start.
func setUpApproval(env Env, f runFlags, s spec.Spec) (approval, error) {
	var a approval
	pol := orchestrator.ApproveNever
	var err error
	if s.Approve != "" {
		if pol, err = orchestrator.ParseApprovalPolicy(s.Approve); err != nil {
			return a, usageErr(fmt.Errorf("approve: %w", err))
		}
	}
	if f.approveSet {
		if pol, err = orchestrator.ParseApprovalPolicy(f.approve); err != nil {
			return a, usageErr(fmt.Errorf("--approve: want never, mutating, all, or tool names separated by commas: %w", err))
		}
	}
	if f.approveTimeout <= 0 || f.approveTimeout > orchestrator.MaxApprovalTimeout {
		return a, usageErr(errors.New("--approve-timeout: must be between 0 and 24h, not included 0"))
	}
	a.cfg = orchestrator.ApprovalConfig{Policy: pol, Timeout: f.approveTimeout}
	if pol.IsNever() {
		if f.approveFrom != "" {
			return a, usageErr(errors.New("--approve-from: no call waits for approval; give a policy with --approve (or approve: in the spec)"))
		}
		return a, nil
	}
	if f.approveFrom != "" {
		answers, err := readAnswers(f.approveFrom)
		if err != nil {
			return a, usageErr(err)
		}
		fa := &fileAnswers{answers: answers, file: f.approveFrom, stderr: env.Stderr}
		a.broker, err = orchestrator.NewApprovals(orchestrator.ApprovalsConfig{OnQuestion: fa.answer})
		fa.b = a.broker
		return a, err
	}
	if f.json || !readsTerminal(env.Stdin) {
		why := "standard input is not a terminal"
		if f.json {
			why = "--json leaves no terminal to ask on"
		}
		return a, usageErr(fmt.Errorf("--approve %s asks a person before those tools run, but %s: "+
			"give the answers with --approve-from FILE (JSON lines), or run on a terminal without --json", pol, why))
	}
	t := &terminalAnswers{in: env.Stdin, out: env.Stderr, timeout: f.approveTimeout,
		questions: make(chan orchestrator.Approval, 16)}
	a.broker, err = orchestrator.NewApprovals(orchestrator.ApprovalsConfig{OnQuestion: t.enqueue})
	t.b = a.broker
	a.start = t.run
	return a, err
}

func readsTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok || f == nil {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// answerLine is one line of an --approve-from file: the answer to the
// next question, and optionally what that question must be about. A
// question that does not match its line is denied.
type answerLine struct {
	Answer string `json:"answer"` // "approve" or "deny"
	Tool   string `json:"tool,omitempty"`
	Call   string `json:"call,omitempty"`
	Worker string `json:"worker,omitempty"`
	Digest string `json:"digest,omitempty"`
}

// readAnswers reads an --approve-from file.
func readAnswers(path string) ([]answerLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--approve-from: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxAnswersBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--approve-from: %w", err)
	}
	return decodeAnswers(path, data)
}

// decodeAnswers decodes JSON lines strictly: each non-blank line one
// answerLine, no unknown fields, nothing after the object.
func decodeAnswers(name string, data []byte) ([]answerLine, error) {
	if len(data) > maxAnswersBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", render.Field(name), maxAnswersBytes)
	}
	var out []answerLine
	for i, l := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		at := render.Field(name) + ":" + strconv.Itoa(i+1)
		if len(out) == maxAnswers {
			return nil, fmt.Errorf("%s: more than %d answers", at, maxAnswers)
		}
		d := json.NewDecoder(bytes.NewReader(l))
		d.DisallowUnknownFields()
		var a answerLine
		if err := d.Decode(&a); err != nil {
			return nil, fmt.Errorf("%s: want a JSON object like {\"answer\":\"approve\"}: %s", at, render.Text(err.Error()))
		}
		if _, err := d.Token(); err != io.EOF {
			return nil, fmt.Errorf("%s: data after the object", at)
		}
		if a.Answer != "approve" && a.Answer != "deny" {
			return nil, fmt.Errorf("%s: answer: want approve or deny", at)
		}
		out = append(out, a)
	}
	return out, nil
}

// fileAnswers answers each question with the next line of the file, at
// once. A question past the last line, or one its line does not describe,
// is denied.
type fileAnswers struct {
	b      *orchestrator.Approvals
	file   string
	stderr io.Writer

	mu      sync.Mutex
	answers []answerLine
	next    int
}

func (f *fileAnswers) answer(q orchestrator.Approval) {
	f.mu.Lock()
	defer f.mu.Unlock()
	approve := false
	if f.next < len(f.answers) {
		l := f.answers[f.next]
		f.next++
		switch {
		case l.Tool != "" && l.Tool != q.Tool, l.Call != "" && l.Call != string(q.Call),
			l.Worker != "" && l.Worker != q.Worker, l.Digest != "" && l.Digest != q.Digest:
			fmt.Fprintf(f.stderr, "spice-orch: answer %d of %s is for another call than %s's %s (call %s): denied\n",
				f.next, render.Field(f.file), render.Field(q.Worker), render.Field(q.Tool), render.Field(string(q.Call)))
		default:
			approve = l.Answer == "approve"
		}
	} else {
		fmt.Fprintf(f.stderr, "spice-orch: %s has no answer left for %s's %s (call %s): denied\n",
			render.Field(f.file), render.Field(q.Worker), render.Field(q.Tool), render.Field(string(q.Call)))
	}
	// The question is pending while OnQuestion runs: this cannot miss.
	_ = f.b.Answer(q.Pair, q.Question, q.Digest, approve)
}

// terminalAnswers asks the person at the terminal, one question at a
// time, on stderr (stdout is the timeline), and reads y or n from stdin.
type terminalAnswers struct {
	b         *orchestrator.Approvals
	in        io.Reader
	out       io.Writer
	timeout   time.Duration
	questions chan orchestrator.Approval
}

// enqueue is OnQuestion: it must not block. A question that finds the
// queue full waits for its timeout, which denies it.
func (t *terminalAnswers) enqueue(q orchestrator.Approval) {
	select {
	case t.questions <- q:
	default:
	}
}

// run answers questions until ctx ends. The goroutine reading stdin lives
// as long as the process: a read of a terminal cannot be cut short.
func (t *terminalAnswers) run(ctx context.Context) {
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(t.in)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go func() {
		for {
			select {
			case q := <-t.questions:
				t.ask(ctx, q, lines)
			case <-ctx.Done():
				return
			}
		}
	}()
}

func (t *terminalAnswers) ask(ctx context.Context, q orchestrator.Approval, lines <-chan string) {
	// A line typed before this question was shown (a late answer to one
	// that timed out) must not answer it.
	for drained := false; !drained; {
		select {
		case _, ok := <-lines:
			drained = !ok
		default:
			drained = true
		}
	}
	args := string(q.Arguments)
	if args == "" {
		args = q.ArgumentsPreview + " ... (" + strconv.Itoa(q.ArgumentsBytes) + " bytes)"
	}
	fmt.Fprintf(t.out, "\napproval: %s wants to run %s (%s, %s), call %s of run %s\n  arguments: %s\n  digest: %s\n"+
		"approve this call? [y/N] (denied in %s): ",
		render.Field(q.Worker), render.Field(q.Tool), render.Field(q.Effect), render.Field(q.Replay),
		render.Field(string(q.Call)), render.Field(string(q.Run)), render.Text(args), q.Digest, t.timeout)
	timer := time.NewTimer(t.timeout)
	defer timer.Stop()
	select {
	case l, ok := <-lines:
		yes := ok && (strings.EqualFold(strings.TrimSpace(l), "y") || strings.EqualFold(strings.TrimSpace(l), "yes"))
		if err := t.b.Answer(q.Pair, q.Question, q.Digest, yes); err != nil {
			fmt.Fprintln(t.out, "too late: the question timed out and the call was denied")
			return
		}
		if yes {
			fmt.Fprintln(t.out, "approved")
		} else {
			fmt.Fprintln(t.out, "denied")
		}
	case <-timer.C:
		fmt.Fprintln(t.out, "\nno answer in time: denied")
	case <-ctx.Done():
	}
}
