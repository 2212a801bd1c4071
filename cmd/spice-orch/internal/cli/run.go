package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/compose"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

type runFlags struct {
	task      string
	json      bool
	workspace string
	store     string
	noStore   bool
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
workspace (relative to the spec file), else a temporary directory that is
removed when the run ends.

Every event is recorded in a store before it is acknowledged: --store,
else $SPICE_ORCH_STORE, else $XDG_STATE_HOME/spice-orch/runs.db, else
~/.local/state/spice-orch/runs.db; see 'spice-orch runs'. --no-store
records nothing.

--json prints the pair timeline as JSON lines instead, one event per line
in sequence order: byte for byte what 'spice-orch runs replay ID --json'
prints later.

Ctrl-C cancels the pair cleanly: the active run is cancelled, no further
run starts, and the timeline ends with one pair.cancelled (exit 130). A
second Ctrl-C exits at once.

Exit codes: 0 completed, 1 failed, 2 bad usage or bad spec, 130 cancelled.`,
		Example: `  # The built-in pair, offline:
  spice-orch run

  # A spec file, with a task of your own, keeping the files it writes:
  spice-orch run examples/review-pair.yaml --task "Write the release notes" --workspace ./out

  # Against OpenAI or a compatible server (vLLM, llama.cpp, Ollama):
  OPENAI_API_KEY=sk-... spice-orch run examples/openai-pair.yaml
  OPENAI_BASE_URL=http://localhost:11434/v1 spice-orch run examples/openai-pair.yaml

  # JSON lines for a program, without recording:
  spice-orch run --json --no-store | jq -c 'select(.kind == "pair.handoff")'`,
		Args: cobra.MaximumNArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"yaml", "yml", "json"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("task") && f.task == "" {
				return usageErr(errors.New("--task must not be empty"))
			}
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
		return s, usageErr(fmt.Errorf("%s: %w", args[0], err))
	}
	return s, nil
}

func runPair(ctx context.Context, env Env, f runFlags, args []string) error {
	s, err := loadSpec(args)
	if err != nil {
		return err
	}
	// The first SIGINT or SIGTERM cancels the pair; after it, the default
	// behaviour is back, so a second one ends the process at once.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)

	dir, temporary, cleanup, err := workspace(f.workspace, s)
	if err != nil {
		return failed(fmt.Errorf("workspace: %w", err))
	}
	defer cleanup()
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
	}
	pairID, err := compose.NewPairID(time.Now(), nil)
	if err != nil {
		return failed(err)
	}
	opts := compose.Options{Spec: s, Task: f.task, Workspace: dir, PairID: pairID, Getenv: env.Getenv}
	if st != nil {
		opts.Store = st
	}
	if kind := env.Getenv(EnvPauseAfter); kind != "" {
		p, err := newPauser(kind, ctx.Done(), env.Stderr)
		if err != nil {
			return usageErr(err)
		}
		opts.Timeline = append(opts.Timeline, p)
	}
	built, err := compose.Build(opts)
	if err != nil {
		var ce *compose.ConfigError
		if errors.As(err, &ce) {
			return usageErr(err)
		}
		return failed(err)
	}
	defer built.Close()

	out := env.Stdout
	var r *render.Renderer
	if !f.json {
		r = render.New(out, render.Options{Color: colorful(out, env.Getenv)})
		header(out, s, args, built.Config.Task, dir, temporary, stPath)
		pluginHeader(out, built)
	}
	pair, err := orchestrator.Start(ctx, built.Config)
	if err != nil {
		if ctx.Err() != nil {
			return &exitError{code: ExitCancelled, err: errors.New("cancelled before the pair started")}
		}
		if errors.Is(err, bound.ErrInvalid) {
			return usageErr(err)
		}
		return failed(err)
	}
	perr := follow(pair, out, r, env.Stderr)
	_, werr := pair.Wait(context.Background())
	if r != nil && st != nil {
		again := "spice-orch runs show " + pairID
		if f.store != "" {
			again += " --store " + stPath
		}
		fmt.Fprintf(out, "recorded: %s\n", again)
	}
	return exitFor(werr, perr)
}

// follow prints the pair timeline from its first event to its terminal.
// With r nil each event is written as its canonical JSON line.
func follow(pair *orchestrator.Pair, out io.Writer, r *render.Renderer, stderr io.Writer) error {
	bg := context.Background()
	sub, err := pair.Subscribe(bg, 0)
	if err != nil {
		return err
	}
	defer func() { sub.Close() }()
	buf := make([]byte, 0, 4096)
	for {
		e, err := sub.Next(bg)
		if err == io.EOF {
			return nil
		}
		var ex *eventlog.ExhaustedError
		if errors.As(err, &ex) {
			// The timeline never waits for its readers; this one fell too
			// far behind. Say what is missing and carry on.
			fmt.Fprintf(stderr, "spice-orch: output fell behind the pair timeline: events %d to %d are not shown (the store has them)\n",
				ex.LastDelivered+1, ex.Recovery)
			sub.Close()
			if sub, err = pair.Subscribe(bg, ex.Recovery); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		buf = e.AppendJSON(buf[:0])
		if r != nil {
			err = r.Line(buf)
		} else {
			_, err = out.Write(append(buf, '\n'))
		}
		if err != nil {
			return err
		}
	}
}

// exitFor maps the pair's end to the command's exit.
func exitFor(waitErr, printErr error) error {
	var de *orchestrator.DurabilityError
	switch {
	case errors.As(waitErr, &de):
		return failed(fmt.Errorf("%w: %v", de, de.Err))
	case errors.Is(waitErr, orchestrator.ErrCancelled):
		return &exitError{code: ExitCancelled, err: errors.New("pair cancelled")}
	case waitErr != nil:
		return failed(waitErr)
	case printErr != nil:
		return failed(fmt.Errorf("printing the timeline: %w", printErr))
	}
	return nil
}

func header(out io.Writer, s spec.Spec, args []string, task, dir string, temporary bool, stPath string) {
	what := "built-in pair: a scripted writer and reviewer (offline, no API key)"
	if len(args) > 0 {
		what = "spec " + args[0]
		if s.Name != "" {
			what += " (" + s.Name + ")"
		}
	}
	fmt.Fprintf(out, "spice-orch: %s\n", what)
	fmt.Fprintf(out, "task: %s\n", oneLine(task))
	if temporary {
		fmt.Fprintf(out, "workspace: %s (temporary, removed at the end; keep the files with --workspace DIR)\n", dir)
	} else {
		fmt.Fprintf(out, "workspace: %s\n", dir)
	}
	if stPath == "" {
		fmt.Fprintln(out, "store: none (--no-store)")
	} else {
		fmt.Fprintf(out, "store: %s\n", stPath)
	}
	fmt.Fprintln(out)
}

func oneLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i] + " ..."
		}
	}
	return s
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
