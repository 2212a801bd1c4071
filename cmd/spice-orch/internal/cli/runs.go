package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/store"
)

type runsFlags struct {
	store    string
	readOnly bool
}

func newRunsCmd(env Env) *cobra.Command {
	var f runsFlags
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List, show, replay and compare recorded pairs",
		Long: `Look at what recorded pairs did: 'runs list' lists them, 'runs show ID'
shows one as a readable timeline, 'runs replay ID --json' prints its
recorded JSON lines, byte for byte what 'run --json' printed, and 'runs diff
A B' prints where two of them first part.

A pair or run that a process left without a terminal (it crashed or was
killed) is shown interrupted, and a mutating tool call that started without
a recorded outcome uncertain: its effect may or may not have happened, and
nothing runs it again automatically. What another process is recording
right now stays running: every process that records into the store holds a
lock the operating system releases when the process ends, and only a pair
whose process is gone is interrupted.

The commands open the store for writing, to mark what they find
interrupted. --read-only marks nothing (and shows the same); when the store
cannot be written (a full disk, a read-only location), it is read
read-only.`,
		Example: `  spice-orch runs list
  spice-orch runs show pair-20261130-015500-1a2b3c4d
  spice-orch runs replay pair-20261130-015500-1a2b3c4d --json > pair.jsonl`,
		Args: cobra.ArbitraryArgs,
		// Without it, cobra prints this help for an unknown subcommand
		// and exits 0.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErr(fmt.Errorf("unknown command %q for %q\nRun '%s --help' for usage.", args[0], cmd.CommandPath(), cmd.CommandPath()))
			}
			return cmd.Help()
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return notEmpty(cmd, "store") },
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.store, "store", "", "the store to read (default $SPICE_ORCH_STORE, else $XDG_STATE_HOME/spice-orch/runs.db)")
	pf.BoolVar(&f.readOnly, "read-only", false, "open the store read-only: mark nothing")
	cmd.AddCommand(newListCmd(env, &f), newShowCmd(env, &f), newReplayCmd(env, &f), newDiffCmd(env, &f), newResumeCmd(env, &f))
	cmd.AddCommand(newExportTraceCmd(env, &f))
	return cmd
}

// open opens the recorded store. A store that does not exist yet is
// reported as ok == false, without creating it.
func (f *runsFlags) open(ctx context.Context, env Env) (st *store.Store, path string, ok bool, err error) {
	if path, err = storePath(f.store, env.Getenv); err != nil {
		return nil, "", false, usageErr(err)
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, path, false, nil
	}
	st, err = openStore(ctx, path, !f.readOnly)
	if err != nil && !f.readOnly && !errors.Is(err, store.ErrNotStore) && !errors.Is(err, store.ErrDamaged) &&
		!errors.As(err, new(*store.VersionError)) {
		// Reading must not depend on what recovery can write (a full
		// disk, a read-only location): read the store as it is, which
		// shows what recovery would have marked.
		ro, rerr := openStore(ctx, path, false)
		if rerr == nil {
			fmt.Fprintf(env.Stderr, "spice-orch: reading the store read-only: it cannot be opened for writing (%s)\n",
				render.Text(err.Error()))
			st, err = ro, nil
		}
	}
	if err != nil {
		return nil, path, false, failed(err)
	}
	return st, path, true, nil
}

func (f *runsFlags) completeIDs(env Env) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		path, err := storePath(f.store, env.Getenv)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		st, err := store.OpenConfig(cmd.Context(), store.Config{Path: path, ReadOnly: true})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer st.Close()
		pairs, _ := st.ListPairs(cmd.Context(), store.ListOptions{})
		ids := make([]string, 0, len(pairs))
		for _, p := range pairs {
			ids = append(ids, p.ID+"\t"+string(p.Status))
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}

var statuses = []store.Status{store.StatusRunning, store.StatusCompleted, store.StatusFailed,
	store.StatusCancelled, store.StatusInterrupted}

func newListCmd(env Env, f *runsFlags) *cobra.Command {
	var limit int
	var status string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List recorded pairs, newest first",
		Example: `  spice-orch runs list
  spice-orch runs list --status interrupted --limit 10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 || limit > store.MaxListLimit {
				return usageErr(fmt.Errorf("--limit must be between 1 and %d (0 for the default, %d)", store.MaxListLimit, store.DefaultListLimit))
			}
			if status != "" && !slices.Contains(statuses, store.Status(status)) {
				return usageErr(errors.New("--status must be one of running, completed, failed, cancelled, interrupted"))
			}
			st, path, ok, err := f.open(cmd.Context(), env)
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintf(env.Stdout, "no pairs recorded yet (no store at %s)\n", render.Field(path))
				return nil
			}
			defer st.Close()
			pairs, err := st.ListPairs(cmd.Context(), store.ListOptions{Limit: limit, Status: store.Status(status)})
			if err != nil {
				return usageOrFailed(err)
			}
			if len(pairs) == 0 {
				fmt.Fprintf(env.Stdout, "no pairs recorded in %s\n", render.Field(path))
				return nil
			}
			tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PAIR\tSTATUS\tREASON\tWORKERS\tSTARTED\tDURATION")
			for _, p := range pairs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", render.Field(p.ID), dash(string(p.Status)), dash(p.Reason),
					dash(strings.Join(p.Workers, ",")), when(p.Started), span(p.Duration(), p.Ended))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "how many pairs to list (default 100)")
	cmd.Flags().StringVar(&status, "status", "", "only pairs with this status: running, completed, failed, cancelled, interrupted")
	return cmd
}

func newShowCmd(env Env, f *runsFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a recorded pair (or run) as a readable timeline",
		Long: `Show a recorded pair: its status and reason, its runs, any tool call whose
outcome is uncertain, and its timeline as 'run' showed it. ID may also be a
run ID, which shows that run's own log.`,
		Example: `  spice-orch runs show pair-20261130-015500-1a2b3c4d
  spice-orch runs show pair-20261130-015500-1a2b3c4d/writer/run-1`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: f.completeIDs(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, _, ok, err := f.open(cmd.Context(), env)
			if err != nil {
				return err
			}
			if !ok {
				return failed(fmt.Errorf("%s: not found (nothing recorded yet)", args[0]))
			}
			defer st.Close()
			return show(cmd.Context(), env, st, args[0])
		},
	}
}

func newReplayCmd(env Env, f *runsFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "replay ID",
		Short: "Print a recorded pair's timeline again",
		Long: `Print the recorded timeline of a pair (or the log of a run). With --json,
print the recorded JSON lines: byte for byte what 'run --json' printed
live. Without it, print the readable timeline.`,
		Example: `  spice-orch runs replay pair-20261130-015500-1a2b3c4d --json
  spice-orch runs replay pair-20261130-015500-1a2b3c4d`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: f.completeIDs(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, _, ok, err := f.open(cmd.Context(), env)
			if err != nil {
				return err
			}
			if !ok {
				return failed(fmt.Errorf("%s: not found (nothing recorded yet)", args[0]))
			}
			defer st.Close()
			if asJSON {
				w := bufio.NewWriter(env.Stdout)
				if err := st.ReplayJSON(cmd.Context(), w, args[0]); err != nil {
					return notFoundOr(args[0], err)
				}
				return w.Flush()
			}
			return replayReadable(cmd.Context(), env, st, args[0])
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the recorded JSON lines")
	return cmd
}

// replayReadable renders a recorded pair timeline, or lists a run log's
// events one per line.
func replayReadable(ctx context.Context, env Env, st *store.Store, id string) error {
	if _, err := st.Pair(ctx, id); err == nil {
		var buf bytes.Buffer
		if err := st.ReplayJSON(ctx, &buf, id); err != nil {
			return notFoundOr(id, err)
		}
		return renderLines(env, buf.Bytes())
	}
	rec, err := st.Run(ctx, id)
	if err != nil {
		return notFoundOr(id, err)
	}
	for _, en := range rec.Events {
		fmt.Fprintln(env.Stdout, render.Field(en.Summary()))
	}
	return nil
}

func renderLines(env Env, data []byte) error {
	r := render.New(env.Stdout, render.Options{Color: colorful(env.Stdout, env.Getenv)})
	for line := range bytes.Lines(data) {
		if err := r.Line(line); err != nil {
			return failed(err)
		}
	}
	return nil
}

func notFoundOr(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return failed(fmt.Errorf("%s: not found", id))
	}
	return failed(err)
}

func usageOrFailed(err error) error {
	if errors.Is(err, bound.ErrInvalid) {
		return usageErr(err)
	}
	return failed(err)
}

// dash shows a value for a table: "-" when empty, else as render.Field
// shows it, since the store holds what models and servers wrote.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return render.Field(s)
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05 MST")
}

func span(d time.Duration, ended time.Time) string {
	if ended.IsZero() {
		return "-"
	}
	return render.FormatDuration(d)
}
