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

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/remotespec"
	"github.com/spice-orch/spice-orch/jetstream"
	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/server"
)

type workerFlags struct {
	url     string
	name    string
	pairs   int
	store   string
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
--data-dir and is recorded in the local store; its timeline also goes to
the server's events stream, from which 'serve --nats' streams it.

A job is held with heartbeats while it plays. If this worker dies, the
job is delivered to another worker after the ack wait, which resumes the
pair from its recorded timeline when it finds it in its store (workers on
one machine sharing one --store): from the last completed run, without
asking a model again for a recorded answer. A mutating tool call that
started without a recorded outcome is never run again: the job ends
failed with reason "uncertain_tool_call", naming the call; a call to a
tool declared idempotent runs again. A worker whose store does not hold
the pair (another machine) ends the job failed with reason "interrupted".

On SIGTERM or SIGINT the worker stops fetching, lets the pairs it holds
finish within --drain, cancels the rest and hands them back.`,
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
	fl.StringVar(&f.dataDir, "data-dir", "", "directory for the pairs' workspaces (default: worker/ beside the store)")
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
	stPath, err := storePath(f.store, env.Getenv)
	if err != nil {
		return usageErr(err)
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
	st, err := openStore(ctx, stPath, true)
	if err != nil {
		return failed(err)
	}
	defer st.Close()
	nc, err := nats.Connect(f.url, nats.Name("spice-orch worker"), nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: this process closed the connection
				fmt.Fprintf(env.Stderr, "spice-orch worker: disconnected from NATS: %v\n", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			fmt.Fprintln(env.Stderr, "spice-orch worker: reconnected to NATS")
		}))
	if err != nil {
		return failed(fmt.Errorf("nats: %w", err))
	}
	defer nc.Close()
	b, err := jetstream.Open(ctx, jetstream.Config{Conn: nc, Name: f.name})
	if err != nil {
		return failed(fmt.Errorf("jetstream: %w", err))
	}
	bld := &remotespec.Builder{Store: st, Record: st, Getenv: env.Getenv}
	fmt.Fprintf(env.Stdout, "spice-orch worker: playing up to %d pairs from %s (store %s)\n", f.pairs, f.url, stPath)
	if ready != nil {
		ready()
	}
	play := func(ctx context.Context, j job.Job) job.Report {
		pub, err := b.Timeline(j.ID, jetstream.TimelineConfig{})
		if err != nil {
			return job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Failed, Reason: "spec_refused", Error: err.Error()}
		}
		rep := playJob(ctx, bld, filepath.Join(dataDir, "workspaces"), j, pub)
		// A pair's terminal publishes what is left; a pair that never
		// started has nothing to publish.
		_ = pub.Flush(context.WithoutCancel(ctx))
		return rep
	}
	// A job delivered again after it started is resumed from this
	// store's record of its pair, built again as play built it.
	resume := jetstream.ResumeFromStore(st, func(ctx context.Context, j job.Job) (orchestrator.Config, func(), error) {
		built, err := bld.Build(ctx, server.BuildRequest{PairID: j.ID, Workspace: filepath.Join(dataDir, "workspaces", j.ID),
			Body: j.Spec, ContentType: "application/yaml", Timeline: discard})
		if err != nil {
			return orchestrator.Config{}, nil, err
		}
		return *built.Config, built.Close, nil
	})
	if err := b.Work(ctx, jetstream.WorkerConfig{Pairs: f.pairs, Play: play, Resume: resume, Drain: f.drain}); err != nil {
		return failed(err)
	}
	fmt.Fprintln(env.Stdout, "spice-orch worker: drained")
	return nil
}

// discard is the timeline of a resumed pair: its continuation is
// recorded in the worker's store only, since the events stream carries a
// pair's timeline from its first event.
var discard = eventlog.ObserverFunc(func(context.Context, eventlog.Event) error { return nil })

// playJob builds the job's pair from its spec and plays it to its end,
// its timeline told to timeline after the local store.
func playJob(ctx context.Context, bld *remotespec.Builder, workspaces string, j job.Job, timeline eventlog.Observer) job.Report {
	rep := job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Failed}
	ws := filepath.Join(workspaces, j.ID)
	if err := os.Mkdir(ws, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		rep.Reason, rep.Error = "workspace", err.Error()
		return rep
	}
	built, err := bld.Build(ctx, server.BuildRequest{PairID: j.ID, Workspace: ws, Body: j.Spec,
		ContentType: "application/yaml", Timeline: timeline})
	if err != nil {
		rep.Reason, rep.Error = "spec_refused", err.Error()
		return rep
	}
	if built.Close != nil {
		defer built.Close()
	}
	pair, err := orchestrator.Run(ctx, *built.Config)
	return pairReport(ctx, rep, pair, err)
}

// pairReport reports how a started pair ended.
func pairReport(ctx context.Context, rep job.Report, pair *orchestrator.Pair, err error) job.Report {
	if err != nil {
		rep.Reason, rep.Error = "refused", err.Error()
		if ctx.Err() != nil {
			rep.State = job.Cancelled
		}
		return rep
	}
	return jetstream.PairReport(rep, pair)
}
