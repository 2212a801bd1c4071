package acceptance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/providers/openai"
	"github.com/spice-orch/spice-orch/store"
	"github.com/spice-orch/spice-orch/tools"
)

// SnapshotTranscripts are the writer's first run: an fs.write call, then
// the answer.
var SnapshotTranscripts = []string{"openai_fs_write.http", "openai_draft.http"}

// Trip is what the snapshot round trip measured.
type Trip struct {
	RunID         id.Run
	SnapshotBytes int
	// SuspendedAt is the last sequence in the snapshot, Events the events
	// of the finished run.
	SuspendedAt uint64
	Events      int
	Turns       int
}

// tripEngine is one engine of the round trip, on its own provider client,
// plan source and tools; the store, the ID source and the clock are the
// host's and outlive it.
func tripEngine(srv *ModelServer, workspace string, st *store.Store, ids id.Source, clock engine.Clock) (*engine.Engine, error) {
	ts, err := tools.New(tools.Config{Root: workspace})
	if err != nil {
		return nil, err
	}
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: ts})
	if err != nil {
		return nil, err
	}
	pl, err := plan.New("plan-snapshot-trip", d)
	if err != nil {
		return nil, err
	}
	plans, err := plan.NewMemory(pl)
	if err != nil {
		return nil, err
	}
	prov, err := openai.New(openai.Config{APIKey: WriterKey, BaseURL: srv.URL(), HTTPClient: srv.Client(), MaxAttempts: 1})
	if err != nil {
		return nil, err
	}
	return engine.New(engine.Config{Provider: prov, Plans: plans, IDs: ids, Clock: clock, Required: []eventlog.Observer{st}})
}

// tripRun plays the writer's first run with its own model server and
// store in dir. With suspend, the run is suspended after its first turn,
// snapshotted, and resumed from the snapshot in a fresh engine, which
// finishes it. It returns the run's events as the store holds them
// (`runs replay --json`), the snapshot and the run's result.
func tripRun(ctx context.Context, dir string, suspend, restartIDs bool) (log, snap []byte, res engine.Result, err error) {
	ts, err := loadAll(SnapshotTranscripts)
	if err != nil {
		return nil, nil, res, err
	}
	var order atomic.Int64
	srv := NewModelServer(&order, Expect{Name: "the writer's model server", Model: WriterModel, Authorization: "Bearer " + WriterKey}, ts...)
	defer srv.Close()
	workspace := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(workspace, 0o755); err != nil {
		return nil, nil, res, err
	}
	st, err := store.Open(ctx, filepath.Join(dir, "spice.db"))
	if err != nil {
		return nil, nil, res, err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	var ids id.Source
	ids, clock := &id.Counter{Prefix: "trip/writer/"}, &enginetest.Clock{}
	def, err := engine.NewDefinition(engine.DefinitionConfig{Name: "writer", Model: WriterModel, System: WriterSystem, MaxTurns: 4})
	if err != nil {
		return nil, nil, res, err
	}
	input, err := message.User(Task)
	if err != nil {
		return nil, nil, res, err
	}
	first, err := tripEngine(srv, workspace, st, ids, clock)
	if err != nil {
		return nil, nil, res, err
	}
	run, err := first.Start(ctx, def, engine.Input{Message: input})
	if err != nil {
		return nil, nil, res, errors.Join(err, first.Close(ctx))
	}
	if suspend {
		// Stops at the first turn boundary after turn 1.
		run.Suspend()
	}
	res, err = run.Wait(ctx)
	if suspend {
		if !errors.Is(err, engine.ErrSuspended) {
			return nil, nil, res, errors.Join(fmt.Errorf("the run was not suspended: %v", err), first.Close(ctx))
		}
		if snap, err = run.Snapshot(); err != nil {
			return nil, nil, res, errors.Join(err, first.Close(ctx))
		}
		if err := first.Close(ctx); err != nil {
			return nil, nil, res, err
		}
		if restartIDs {
			// A fault: the host's ID source forgets what it handed out.
			ids = &id.Counter{Prefix: "trip/writer/"}
		}
		fresh, err := tripEngine(srv, workspace, st, ids, clock)
		if err != nil {
			return nil, snap, res, err
		}
		resumed, err := fresh.Resume(ctx, snap)
		if err != nil {
			return nil, snap, res, errors.Join(fmt.Errorf("resuming the snapshot: %w", err), fresh.Close(ctx))
		}
		res, err = resumed.Wait(ctx)
		err = errors.Join(err, fresh.Close(ctx))
		run = resumed
	} else {
		err = errors.Join(err, first.Close(ctx))
	}
	if err != nil {
		return nil, snap, res, err
	}
	log, err = replay(ctx, st, string(run.ID()))
	return log, snap, res, err
}

// CheckSnapshotTrip plays the snapshot round trip of a run of the pair,
// the writer's first: uninterrupted, then suspended after its first turn,
// snapshotted, resumed in a fresh engine (new provider client, plan source
// and tools; the store, ID source and clock are the host's) and finished.
// The two runs' event logs in the store must be equal byte for byte, and
// so must their final answers; the snapshot decodes and encodes to its
// own bytes (K29).
func CheckSnapshotTrip(ctx context.Context, dir string) (Trip, error) {
	return checkSnapshotTrip(ctx, dir, false)
}

func checkSnapshotTrip(ctx context.Context, dir string, restartIDs bool) (Trip, error) {
	var tr Trip
	whole, _, wres, err := tripRun(ctx, filepath.Join(dir, "whole"), false, false)
	if err != nil {
		return tr, fail(PartSnapshot, "the uninterrupted run: %v", err)
	}
	split, snap, sres, err := tripRun(ctx, filepath.Join(dir, "split"), true, restartIDs)
	if err != nil {
		return tr, fail(PartSnapshot, "the suspended and resumed run: %v", err)
	}
	s, err := engine.DecodeSnapshot(snap)
	if err != nil {
		return tr, fail(PartSnapshot, "decoding the snapshot: %v", err)
	}
	tr = Trip{RunID: s.RunID(), SnapshotBytes: len(snap), SuspendedAt: s.LastSeq(), Turns: s.Turns(), Events: bytes.Count(split, []byte("\n"))}
	again, err := engine.EncodeSnapshot(s)
	if err != nil || !bytes.Equal(again, snap) {
		return tr, fail(PartSnapshot, "the snapshot does not encode to its own bytes: %v", err)
	}
	if s.Status() != engine.Suspended || s.Turns() != 1 {
		return tr, fail(PartSnapshot, "the snapshot is of a %s run after %d turns, want suspended after 1", s.Status(), s.Turns())
	}
	if !bytes.Equal(whole, split) {
		return tr, fail(PartSnapshot, "the resumed run's events differ from the uninterrupted run's: %s", firstDifference(whole, split))
	}
	if wres.Status != engine.Completed || sres.Status != engine.Completed || wres.Final.Text() != sres.Final.Text() {
		return tr, fail(PartSnapshot, "the runs ended %s and %s with final answers %q and %q", wres.Status, sres.Status, wres.Final.Text(), sres.Final.Text())
	}
	return tr, nil
}
