package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/compose"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/mcplog"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/otelsetup"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/pluginlog"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/mcp/servers"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/plugins/host"
	"github.com/spice-orch/spice-orch/store"
	"github.com/spice-orch/spice-orch/tools"
)

type runFlags struct {
	task      string
	json      bool
	workspace string
	store     string
	noStore   bool
	otel      bool

	approve        string
	approveSet     bool
	approveTimeout time.Duration
	approveFrom    string
}

func newRunCmd(env Env) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [SPEC]",
		Short: "Run a pair: the built-in writer/reviewer pair, or the pair a spec file describes",
		Long: `Run a pair and show its timeline as it happens: each worker's turns and
answers, its tool calls with their outcome, each handoff, and a summary
(termination reason, rounds, tool calls, tokens, duration).

Without SPEC, run the built-in pair: a scripted writer and reviewer that
call the real file tools, go through one rejected round and one approved
round, and need no network and no API key.

The file tools are confined to a workspace: --workspace, else the spec's
workspace (a folder inside the spec file's folder; a spec cannot name one
elsewhere, even through a symbolic link), else a temporary directory that
is removed when the run ends.

Every event is recorded in a store before it is acknowledged: --store,
else $SPICE_ORCH_STORE, else $XDG_STATE_HOME/spice-orch/runs.db, else
~/.local/state/spice-orch/runs.db; see 'spice-orch runs'. --no-store
records nothing.

--json prints the pair timeline as JSON lines instead, one event per line
in sequence order: byte for byte what 'spice-orch runs replay ID --json'
prints later.

Ctrl-C cancels the pair cleanly: the active run is cancelled, no further
run starts, and the timeline ends with one ` + orchestrator.KindCancelled + ` (exit 130). A
second Ctrl-C exits at once.

--approve POLICY (or the spec's approve:) makes tool calls wait for a
person's approval before they run: never (the default), mutating (every
tool with side effects), all, or tool names separated by commas. On a
terminal each question shows the worker, the tool, its effect and its
arguments, and waits for y or n on standard input; no answer within
--approve-timeout (default 5m) denies the call. A denied call does not
run: the model gets an approval_denied or approval_timeout result and can
change course. With --json, or when standard input is not a terminal, a
policy other than never needs --approve-from FILE: JSON lines, one answer
per question in order, like {"answer":"approve"} or
{"answer":"deny","tool":"fs.write"} (tool, call, worker and digest, when
given, must match the question, or it is denied).

Exit codes: 0 completed, 1 failed, 2 bad usage or bad spec, 130 cancelled.`,
		Example: `  # The built-in pair, offline:
  spice-orch run

  # A spec file, with a task of your own, keeping the files it writes:
  spice-orch run examples/review-pair.yaml --task "Write the release notes" --workspace ./out

  # Against OpenAI or a compatible server (vLLM, llama.cpp, Ollama):
  OPENAI_API_KEY=sk-... spice-orch run examples/openai-pair.yaml
  OPENAI_BASE_URL=http://localhost:11434/v1 spice-orch run examples/openai-pair.yaml

  # Ask before each tool with side effects runs (y/n on the terminal):
  spice-orch run --approve mutating

  # The same for a script: answers from a file of JSON lines:
  spice-orch run --json --approve mutating --approve-from answers.jsonl

  # JSON lines for a program, without recording:
  spice-orch run --json --no-store | jq -c 'select(.kind == "` + orchestrator.KindHandoff + `")'`,
		Args: cobra.MaximumNArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"yaml", "yml", "json"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("task") && f.task == "" {
				return usageErr(errors.New("--task must not be empty"))
			}
			if err := notEmpty(cmd, "store", "workspace", "approve-from"); err != nil {
				return err
			}
			f.approveSet = cmd.Flags().Changed("approve")
			return runPair(cmd.Context(), env, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.task, "task", "t", "", "the task for the first worker (default: the spec's task, or a built-in one)")
	fl.BoolVar(&f.json, "json", false, "print the pair timeline as JSON lines instead of the readable timeline")
	fl.StringVarP(&f.workspace, "workspace", "w", "", "directory the file tools are confined to; created if missing, kept")
	fl.StringVar(&f.store, "store", "", "the store to record into (default $SPICE_ORCH_STORE, else $XDG_STATE_HOME/spice-orch/runs.db)")
	fl.BoolVar(&f.noStore, "no-store", false, "record nothing")
	cmd.MarkFlagsMutuallyExclusive("store", "no-store")
	fl.BoolVar(&f.otel, "otel", false, otelHelp)
	fl.StringVar(&f.approve, "approve", "", "which tool calls wait for your approval: never, mutating, all, or tool names separated by commas (default: the spec's approve, else never)")
	fl.DurationVar(&f.approveTimeout, "approve-timeout", orchestrator.DefaultApprovalTimeout, "how long a call waits for its approval; no answer in time denies it")
	fl.StringVar(&f.approveFrom, "approve-from", "", "answer approvals from this file of JSON lines, one {\"answer\":\"approve\"|\"deny\"} per question in order (for scripts and --json)")
	return cmd
}

// loadSpec reads the spec named by args, or returns the built-in pair.
func loadSpec(args []string) (spec.Spec, error) {
	if len(args) == 0 {
		return spec.Builtin(), nil
	}
	s, err := spec.DecodeFile(args[0])
	if err != nil {
		return s, usageErr(err)
	}
	if err := compose.Check(s); err != nil {
		return s, usageErr(err)
	}
	if err := checkPluginFiles(s); err != nil {
		return s, usageErr(err)
	}
	if s.Workspace != "" {
		if _, err := specWorkspace(s); err != nil {
			if errors.Is(err, spec.ErrInvalid) {
				return s, usageErr(err)
			}
			return s, failed(fmt.Errorf("workspace: %w", err))
		}
	}
	return s, nil
}

func runPair(ctx context.Context, env Env, f runFlags, args []string) error {
	s, err := loadSpec(args)
	if err != nil {
		return err
	}
	return playPair(ctx, env, f, s, args, nil)
}

// playPair runs the pair of spec s, or resumes the recorded one rj names.
func playPair(ctx context.Context, env Env, f runFlags, s spec.Spec, args []string, rj *resumeJob) error {
	appr, err := setUpApproval(env, f, s)
	if err != nil {
		return err
	}
	// The first SIGINT or SIGTERM cancels the pair; after it, the default
	// behaviour is back, so a second one ends the process at once.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)

	dir, temporary, cleanup, err := workspace(f.workspace, s)
	if errors.Is(err, errNotDir) || errors.Is(err, spec.ErrInvalid) {
		return usageErr(err)
	}
	if err != nil {
		return failed(fmt.Errorf("workspace: %w", err))
	}
	defer cleanup()
	if !temporary {
		// A run killed mid-write left its temporary file beside the
		// target; a minute-old one belongs to no write in progress.
		if n, err := tools.RemoveLeftovers(dir, time.Now().Add(-time.Minute)); err == nil && n > 0 {
			fmt.Fprintf(env.Stderr, "spice-orch: removed %d temporary file(s) an interrupted fs.write left in the workspace\n", n)
		}
	}
	var st *store.Store
	var stPath string
	if !f.noStore {
		if stPath, err = storePath(f.store, env.Getenv); err != nil {
			return usageErr(err)
		}
		if st, err = openStore(ctx, stPath, true); err != nil {
			return failed(err)
		}
		defer st.Close()
		if rj != nil {
			// Of two resumes at once, one plays the pair.
			switch err := st.ClaimPair(ctx, rj.pairID); {
			case errors.Is(err, store.ErrClaimed):
				return failed(fmt.Errorf("%s is being played by another process", render.Field(rj.pairID)))
			case errors.Is(err, store.ErrEnded):
				return failed(fmt.Errorf("%s has ended: only an interrupted pair resumes", render.Field(rj.pairID)))
			case err != nil:
				return failed(err)
			}
		}
	}
	var pairID string
	if rj != nil {
		pairID = rj.pairID
	} else if pairID, err = compose.NewPairID(time.Now(), nil); err != nil {
		return failed(err)
	}
	out := env.Stdout
	pr := &printer{out: out}
	if !f.json {
		pr.r = render.New(out, render.Options{Color: colorful(out, env.Getenv)})
	}
	opts := compose.Options{Spec: s, Task: f.task, Workspace: dir, PairID: pairID, Getenv: env.Getenv,
		Timeline: []eventlog.Observer{pr}, Approval: appr.cfg}
	if appr.broker != nil {
		opts.Broker = appr.broker
	}
	if stPath != "" {
		// Beside the store: a resumed pair's repeated writes find the
		// keys of the first ones.
		opts.Journal = filepath.Join(filepath.Dir(stPath), "fs.write-keys")
		if err := os.MkdirAll(opts.Journal, 0o700); err != nil {
			return failed(fmt.Errorf("fs.write journal: %w", err))
		}
	}
	var rec *recording
	var plugins *pluginlog.Recorder
	var mcps *mcplog.Recorder
	if st != nil {
		var o eventlog.Observer = st
		if env.wrapStore != nil {
			o = env.wrapStore(o)
		}
		rec = &recording{store: o}
		opts.Store = rec
		if len(s.Plugins) > 0 {
			var after uint64
			if rj != nil {
				after = rj.pluginSeq
			}
			if plugins, err = pluginlog.NewRecorder(pairID, o, time.Now, after); err != nil {
				return failed(err)
			}
			opts.PluginEvents = plugins.OnEvent
		}
		if len(s.MCPServers) > 0 {
			var after uint64
			if rj != nil {
				after = rj.mcpSeq
			}
			if mcps, err = mcplog.NewRecorder(pairID, o, time.Now, after); err != nil {
				return failed(err)
			}
			opts.MCPEvents = mcps.OnEvent
			if env.mcpEvent != nil {
				opts.MCPEvents = func(e servers.Event) { mcps.OnEvent(e); env.mcpEvent(e) }
			}
		}
		if rj == nil {
			// Beside the pair's events, not one of them: straight to
			// the store.
			if err := recordRecipe(ctx, st, pairID, args, f, dir, temporary); err != nil {
				return failed(fmt.Errorf("store: %w", err))
			}
		}
	}
	if kind := env.Getenv(EnvPauseAfter); kind != "" {
		p, err := newPauser(kind, ctx.Done(), env.Stderr)
		if err != nil {
			return usageErr(err)
		}
		opts.Timeline = append(opts.Timeline, p)
	}
	built, err := compose.Build(opts)
	if err != nil && rj != nil && errors.Is(err, host.ErrDigest) {
		return resumeRefused(pairID, &orchestrator.ResumeError{Reason: orchestrator.ReasonPluginChanged, Err: err})
	}
	if err != nil {
		var ce *compose.ConfigError
		if errors.As(err, &ce) {
			return usageErr(err)
		}
		return failed(err)
	}
	defer built.Close()
	if mcps != nil {
		if err := mcps.Flush(ctx); err != nil {
			fmt.Fprintf(env.Stderr, "spice-orch: the store refused MCP events: %s\n", render.Text(err.Error()))
		}
	}
	if plugins != nil {
		plugins.SetLookup(built.PluginPlan)
		// The first plan's activation: recorded before the pair starts,
		// so that its plan ID is findable as soon as a run names it.
		if err := plugins.Flush(ctx); err != nil {
			fmt.Fprintf(env.Stderr, "spice-orch: the store refused plugin events: %s\n", render.Text(err.Error()))
		}
	}
	if st != nil {
		// Straight to the store: the record is not an event of the pair.
		otelsetup.WriteRecord(ctx, env.Stderr, st, &built.Config, trace.SpanContext{})
	}
	if f.otel {
		o, err := otelsetup.Start(ctx, otelEnv(env), true, otelsetup.ProviderNames(s))
		if err != nil {
			return otelErr(err)
		}
		defer o.Shutdown(env.Stderr)
		o.Observe(&built.Config)
	}

	var rc orchestrator.ResumeConfig
	if rj != nil {
		if err := rj.checkPlugins(built); err != nil {
			return err
		}
		rc = orchestrator.ResumeConfig{Pair: built.Config, Timeline: rj.timeline, Accept: rj.accept, RunLogs: rj.runLogs}
		if err := rc.Check(ctx); err != nil {
			return resumeRefused(pairID, err)
		}
	}
	if !f.json {
		header(out, s, args, built.Config.Task, dir, temporary, stPath)
		pluginHeader(out, built)
	}
	if appr.start != nil {
		appr.start(ctx)
	}
	var pair *orchestrator.Pair
	if rj != nil {
		pair, err = orchestrator.Resume(ctx, rc)
		if err != nil {
			return resumeRefused(pairID, err)
		}
	} else {
		pair, err = orchestrator.Start(ctx, built.Config)
	}
	if err != nil {
		if ctx.Err() != nil {
			return &exitError{code: ExitCancelled, err: errors.New("cancelled before the pair started")}
		}
		if errors.Is(err, bound.ErrInvalid) {
			return usageErr(err)
		}
		return failed(err)
	}
	_, werr := pair.Wait(context.Background())
	if mcps != nil {
		// Closing the servers drains their generations: their last events.
		built.Close()
		err := mcps.Flush(context.Background())
		err = errors.Join(err, mcps.Close(context.Background()))
		if err != nil {
			fmt.Fprintf(env.Stderr, "spice-orch: the store refused MCP events: %s\n", render.Text(err.Error()))
		}
	}
	if plugins != nil {
		// Closing the host drains its generations: their last events.
		built.Close()
		err := plugins.Flush(context.Background())
		err = errors.Join(err, plugins.Close(context.Background()))
		if err != nil {
			fmt.Fprintf(env.Stderr, "spice-orch: the store refused plugin events: %s\n", render.Text(err.Error()))
		}
	}
	if rec != nil {
		again := "spice-orch runs show " + pairID
		if f.store != "" {
			again += " --store " + render.Field(stPath)
		}
		n, first := rec.refused()
		switch {
		case n > 0:
			// Say so on stderr too: with --json, stdout is only the timeline.
			fmt.Fprintf(env.Stderr, "spice-orch: the store refused %d events, which are not recorded (and were not printed); the first: %s\n",
				n, render.Text(first.Error()))
			if !f.json {
				fmt.Fprintf(out, "recorded in part (the store refused %d events): %s shows what it kept\n", n, again)
			}
		case !f.json:
			fmt.Fprintf(out, "recorded: %s\n", again)
		}
	}
	return exitFor(werr, pr.error(), s.Limits)
}

// printer prints the pair timeline: with r nil each event as its canonical
// JSON line (byte for byte what the store records and `runs replay --json`
// prints), else rendered. It is a Timeline observer of compose, so it is
// told of an event only after the store acknowledged that same event:
// nothing is printed that the store does not hold, even when the process
// is killed between the two. It never refuses an event: a failed write is
// kept for the exit status, and printing stops there. A stdout that does
// not take the output holds the pair, as any required observer may.
type printer struct {
	out io.Writer
	r   *render.Renderer

	mu  sync.Mutex
	buf []byte
	err error
}

func (p *printer) Observe(_ context.Context, e eventlog.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil
	}
	p.buf = e.AppendJSON(p.buf[:0])
	if p.r != nil {
		p.err = p.r.Line(p.buf)
	} else {
		p.buf = append(p.buf, '\n')
		_, p.err = p.out.Write(p.buf)
	}
	return nil
}

func (p *printer) error() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// recording is the store as the pair's observers see it, counting what it
// refused, so that the summary claims only what was recorded.
type recording struct {
	store eventlog.Observer

	mu    sync.Mutex
	n     int
	first error
}

func (r *recording) Observe(ctx context.Context, e eventlog.Event) error {
	err := r.store.Observe(ctx, e)
	if err != nil {
		r.mu.Lock()
		if r.n == 0 {
			r.first = err
		}
		r.n++
		r.mu.Unlock()
	}
	return err
}

func (r *recording) refused() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, r.first
}

// exitFor maps the pair's end to the command's exit.
func exitFor(waitErr, printErr error, l spec.Limits) error {
	var de *orchestrator.DurabilityError
	switch {
	case errors.As(waitErr, &de):
		return failed(fmt.Errorf("%w: %v", de, de.Err))
	case errors.Is(waitErr, orchestrator.ErrCancelled):
		return &exitError{code: ExitCancelled, err: errors.New("pair cancelled")}
	case waitErr != nil:
		if why := why(waitErr, l); why != "" {
			return failed(fmt.Errorf("%w: %s", waitErr, why))
		}
		return failed(waitErr)
	case printErr != nil:
		return failed(fmt.Errorf("printing the timeline: %w", printErr))
	}
	return nil
}

func header(out io.Writer, s spec.Spec, args []string, task, dir string, temporary bool, stPath string) {
	what := "built-in pair: a scripted writer and reviewer (offline, no API key)"
	if len(args) > 0 {
		what = "spec " + render.Field(args[0])
		if s.Name != "" {
			what += " (" + render.Field(s.Name) + ")"
		}
	}
	fmt.Fprintf(out, "spice-orch: %s\n", what)
	fmt.Fprintf(out, "task: %s\n", oneLine(task))
	if temporary {
		fmt.Fprintf(out, "workspace: %s (temporary, removed at the end; keep the files with --workspace DIR)\n", render.Field(dir))
	} else {
		fmt.Fprintf(out, "workspace: %s\n", render.Field(dir))
	}
	if stPath == "" {
		fmt.Fprintln(out, "store: none (--no-store)")
	} else {
		fmt.Fprintf(out, "store: %s\n", render.Field(stPath))
	}
	fmt.Fprintln(out)
}

// oneLine is the first line of s, shown as render.Field shows a value.
func oneLine(s string) string {
	if first, _, more := strings.Cut(s, "\n"); more {
		return render.Field(first) + " ..."
	}
	return render.Field(s)
}

// openStore opens the store at path; writable creates its directory.
func openStore(ctx context.Context, path string, writable bool) (*store.Store, error) {
	if writable {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	st, err := store.OpenConfig(ctx, store.Config{Path: path, ReadOnly: !writable})
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	return st, nil
}

// why says which bound ended a pair, and its value. The pair's error
// names only the reason: the bound's value is the spec's.
func why(err error, l spec.Limits) string {
	var pe *orchestrator.Error
	if !errors.As(err, &pe) {
		return ""
	}
	switch pe.Reason {
	case orchestrator.ReasonBudgetExhausted:
		switch pe.Limit {
		case orchestrator.LimitTokens:
			return "the pair used its budget of " + count(l.Tokens, "token") + " (limits.budget.tokens)"
		case orchestrator.LimitToolCalls:
			return "the models asked for more than the budget of " + count(l.ToolCalls, "tool call") + " (limits.budget.tool_calls)"
		case orchestrator.LimitWallTime:
			return fmt.Sprintf("the pair ran longer than its budget of %s (limits.budget.wall_time)", l.WallTime)
		}
	case orchestrator.ReasonMaxRounds:
		n := l.MaxRounds
		if n == 0 {
			n = orchestrator.DefaultMaxRounds
		}
		return "no approval within " + count(int64(n), "round") + " (limits.max_rounds)"
	case orchestrator.ReasonLoopDetected:
		return "a handoff repeated the content of an earlier one"
	case orchestrator.ReasonHandoffRejected:
		// The policy's bound error names the field, the limit and the
		// size, never the content.
		var be *bound.Error
		if errors.As(pe.Err, &be) {
			return "the handoff policy refused the answer: " + be.Error() + " (handoff.max_bytes, handoff.over_bound)"
		}
	}
	return ""
}

func count(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}
