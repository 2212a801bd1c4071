package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/jobworker"
)

type workerFlags struct {
	url     string
	name    string
	pairs   int
	store   string
	noStore bool
	dataDir string
	drain   time.Duration
}

func newWorkerCmd(env Env) *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Play pair jobs from NATS JetStream",
		Long: `Play pair jobs from a NATS JetStream server: fetch one job per free slot
(--pairs at once), build its pair from the job's spec as serve builds a
spec sent over HTTP (no workspace, no plugins, no openai base_url), play
it, and record its terminal state. Each pair gets its own workspace under
--data-dir and is recorded in the local store (none with --no-store); its
timeline also goes to the server's events stream, from which
'serve --nats' streams it.

A job is held with heartbeats while it plays. If this worker dies, the
job is delivered to another worker after the ack wait, on any machine,
which resumes the pair: from its store's record when it holds the pair
(workers on one machine sharing one --store), and otherwise (always with
--no-store) from the timeline the server's events stream holds. It goes on from the last
completed run, without asking a model again for a recorded answer. A
tool call's start is on the stream before the call runs, so a mutating
call that started without a recorded outcome is never run again: the job
ends failed with reason "uncertain_tool_call", naming the call; a call to
a tool declared idempotent runs again. The resumed pair's events continue
the same timeline on the stream. Files the pair's tools wrote stay in the
first worker's workspace.

On SIGTERM or SIGINT the worker stops fetching, lets the pairs it holds
finish within --drain, and hands back the rest without ending them: each
stops, publishing nothing more, and the worker that gets its job next
resumes it as above.`,
		Example: `  spice-orch worker --nats nats://127.0.0.1:4222 --pairs 4`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runWorker(ctx, env, f, nil)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "nats", "", "the NATS server's URL (required)")
	fl.StringVar(&f.name, "name", "spice", "the job backend's name on that server")
	fl.IntVar(&f.pairs, "pairs", 4, "pairs played at once")
	fl.StringVar(&f.store, "store", "", "the store to record into (default as for 'run')")
	fl.BoolVar(&f.noStore, "no-store", false, "record into no local store; resume from the events stream only")
	cmd.MarkFlagsMutuallyExclusive("store", "no-store")
	fl.StringVar(&f.dataDir, "data-dir", "", "directory for the pairs' workspaces (default: worker/ beside the default store)")
	fl.DurationVar(&f.drain, "drain", 30*time.Second, "how long held pairs may finish after SIGTERM")
	return cmd
}

// runWorker plays jobs until ctx is done, then drains. ready, if set, is
// called once the worker fetches.
func runWorker(ctx context.Context, env Env, f workerFlags, ready func()) error {
	if f.url == "" {
		return usageErr(errors.New("--nats is required"))
	}
	if f.pairs < 1 || f.pairs > 4096 {
		return usageErr(errors.New("--pairs must be between 1 and 4096"))
	}
	if f.drain <= 0 || f.drain > time.Hour {
		return usageErr(errors.New("--drain must be between 0 and 1h"))
	}
	// Without a store the default store's path only places the data
	// directory, when it is not given.
	var stPath string
	var err error
	if !f.noStore || f.dataDir == "" {
		if stPath, err = storePath(f.store, env.Getenv); err != nil {
			return usageErr(err)
		}
	}
	dataDir := f.dataDir
	if dataDir == "" {
		dataDir = filepath.Join(filepath.Dir(stPath), "worker")
	}
	if dataDir, err = filepath.Abs(dataDir); err != nil {
		return failed(err)
	}
	if err := os.MkdirAll(filepath.Join(dataDir, "workspaces"), 0o700); err != nil {
		return failed(fmt.Errorf("data dir: %w", err))
	}
	cfg := jobworker.Config{URL: f.url, Name: f.name, Pairs: f.pairs, Drain: f.drain,
		DataDir: dataDir, Stdout: env.Stdout, Stderr: env.Stderr, Getenv: env.Getenv, Ready: ready}
	if !f.noStore {
		st, err := openStore(ctx, stPath, true)
		if err != nil {
			return failed(err)
		}
		defer st.Close()
		cfg.Store, cfg.StorePath = st, stPath
	}
	err = jobworker.Run(ctx, cfg)
	if err != nil {
		return failed(err)
	}
	fmt.Fprintln(env.Stdout, "spice-orch worker: drained")
	return nil
}
