package jobworker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/remotespec"
	"github.com/spice-orch/spice-orch/jetstream"
	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/server"
	"github.com/spice-orch/spice-orch/store"
)

// Config is one worker, as the worker command's flags chose it.
type Config struct {
	URL   string        // the NATS server
	Name  string        // the job backend's name on it
	Pairs int           // pairs played at once
	Drain time.Duration // how long held pairs may finish once ctx ends

	// Store records every pair played, and is where a job delivered
	// again is resumed from when it holds the pair; StorePath names it
	// in messages. nil records nothing, and resumes from the events
	// stream only. Each pair's workspace is made in DataDir/workspaces,
	// which must exist.
	Store     *store.Store
	StorePath string
	DataDir   string

	// Stdout and Stderr take the worker's messages to its operator.
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Ready, if set, is called once the worker fetches.
	Ready func()
}

// Run plays jobs until ctx is done, then drains.
func Run(ctx context.Context, cfg Config) error {
	nc, err := jetstream.Connect(cfg.URL, jetstream.ConnectConfig{Name: "spice-orch worker",
		Log: slog.New(slog.NewTextHandler(cfg.Stderr, nil)).With("cmd", "worker")})
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	defer nc.Close()
	b, err := jetstream.Open(ctx, jetstream.Config{Conn: nc, Name: cfg.Name})
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	bld := &remotespec.Builder{Getenv: cfg.Getenv}
	where := "no store"
	if cfg.Store != nil {
		// Only a store that is there: a nil *store.Store would make
		// observers that are not nil.
		bld.Store, bld.Record = cfg.Store, cfg.Store
		where = "store " + cfg.StorePath
	}
	fmt.Fprintf(cfg.Stdout, "spice-orch worker: playing up to %d pairs from %s (%s)\n", cfg.Pairs, jetstream.Redact(cfg.URL), where)
	if cfg.Ready != nil {
		cfg.Ready()
	}
	play := func(ctx context.Context, j job.Job) job.Report {
		pub, err := b.Timeline(j.ID, jetstream.TimelineConfig{})
		if err != nil {
			return job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Failed, Reason: "spec_refused", Error: err.Error()}
		}
		rep := playJob(ctx, attempt(b, bld, j.ID), filepath.Join(cfg.DataDir, "workspaces"), j, pub)
		// A pair's terminal publishes what is left; a pair that never
		// started has nothing to publish.
		_ = pub.Flush(context.WithoutCancel(ctx))
		return rep
	}
	// A job delivered again after it started is resumed from this
	// store's record of its pair when it holds it (workers sharing a
	// store), and otherwise from the events stream, built again as play
	// built it: without this store, which lacks the pair's beginning.
	resumeBuild := func(bld *remotespec.Builder) jetstream.BuildFunc {
		return func(ctx context.Context, j job.Job) (orchestrator.Config, func(), error) {
			ws := filepath.Join(cfg.DataDir, "workspaces", j.ID)
			if err := os.MkdirAll(ws, 0o700); err != nil {
				return orchestrator.Config{}, nil, err
			}
			built, err := attempt(b, bld, j.ID).Build(ctx, server.BuildRequest{PairID: j.ID, Workspace: ws,
				Body: j.Spec, ContentType: "application/yaml", Timeline: discard})
			if err != nil {
				return orchestrator.Config{}, nil, err
			}
			c := *built.Config
			c.FinalizeTimeout = observerWait
			return c, built.Close, nil
		}
	}
	bare := resumeBuild(&remotespec.Builder{Getenv: cfg.Getenv})
	resume := b.ResumeFromEvents(bare, jetstream.TimelineConfig{})
	if cfg.Store != nil {
		resume = b.ResumeFromStoreOrEvents(cfg.Store, resumeBuild(bld), bare, jetstream.TimelineConfig{})
	}
	return b.Work(ctx, jetstream.WorkerConfig{Pairs: cfg.Pairs, Play: play, Resume: resume, Drain: cfg.Drain})
}

// attempt is bld for one play of the job: its store records the pair
// only while this attempt holds the job, so that a pair handed back at
// the drain's bound, or taken over, is not recorded here as ended, and a
// worker sharing the store resumes it.
func attempt(b *jetstream.Backend, bld *remotespec.Builder, jobID string) *remotespec.Builder {
	if bld.Store == nil {
		return bld
	}
	one := *bld
	one.Store = b.Attempt(jobID, bld.Store)
	return &one
}

// observerWait bounds a pair's wait for its timeline observers, the
// events stream among them. The kernel's default of 5 s would fail a
// pair across a NATS server's restart or a pause of this process that
// the job's lease rides out; half of AckWait leaves the other half for
// the heartbeat that follows.
const observerWait = jetstream.DefaultAckWait / 2

// discard stands for the timeline of a resumed pair: the backend adds
// its publisher.
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
	c := *built.Config
	c.FinalizeTimeout = observerWait
	pair, err := orchestrator.Run(ctx, c)
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
