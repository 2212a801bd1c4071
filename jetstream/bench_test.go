package jetstream

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/handoff"
	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/workers"
)

// envPlay set to "pairs" makes a worker process play scripted pairs,
// each one's timeline published to the events stream: the job's spec
// names the pair's shape (pairShapes).
const envPlay = "SPICE_JS_TEST_WORKER_PLAY"

// benchConfig is the backend of the benchmark and its worker processes:
// the default limits and AckWait, so that a loaded machine does not
// redeliver.
func benchConfig(nc *nats.Conn) Config { return Config{Conn: nc, Name: "bench", MaxAge: time.Hour} }

// pairShapes are the scripted pairs the benchmark plays, by job spec,
// each with the number of timeline events it emits. A pair's config is
// made for each job: a shape's scripts are played in order, and pairs
// played at once must not take each other's answers.
var pairShapes = map[string]struct {
	events int
	config func() (orchestrator.Config, error)
}{
	"relay":  {17, relayConfig},
	"review": {60, reviewConfig},
}

// scriptedWorker is a text worker whose scripted provider answers with
// the scripts in turn, cycling.
func scriptedWorker(role string, ids *id.Counter, clock *enginetest.Clock, script ...[]model.Item) (workers.Config, error) {
	p := enginetest.NewProvider(script...)
	p.Cycle = true
	d, err := engine.NewDefinition(engine.DefinitionConfig{Name: role, Model: "scripted-1", System: "Be brief.", MaxTurns: 4})
	return workers.Config{Role: role, Definition: d, Engine: engine.Config{Provider: p, IDs: ids, Clock: clock}}, err
}

// relayConfig is a relay pair of two text workers answering in one text
// delta each, as the scheduler's throughput benchmark plays: 17 events.
func relayConfig() (orchestrator.Config, error) {
	plans, err := enginetest.Plan("plan-1")
	if err != nil {
		return orchestrator.Config{}, err
	}
	ids, clock := &id.Counter{}, &enginetest.Clock{}
	first, err := scriptedWorker("writer", ids, clock, enginetest.Answer("Hello there."))
	if err != nil {
		return orchestrator.Config{}, err
	}
	second, err := scriptedWorker("reviewer", ids, clock, enginetest.Answer("Looks good."))
	return orchestrator.Config{Plans: plans, First: first, Second: second,
		Pattern: orchestrator.Relay, Task: "Write one line about the sea."}, err
}

// reviewConfig is a review loop of three rounds without tool calls: the
// writer streams each draft in four text deltas, the reviewer answers
// twice in two and approves the third draft in one. 60 events, 21 of
// them text deltas.
func reviewConfig() (orchestrator.Config, error) {
	plans, err := enginetest.Plan("plan-1")
	if err != nil {
		return orchestrator.Config{}, err
	}
	ids, clock := &id.Counter{}, &enginetest.Clock{}
	answer := func(chunks ...string) []model.Item {
		var items []model.Item
		for _, c := range chunks {
			items = append(items, enginetest.Text(c))
		}
		return append(items, enginetest.Done(10, 5))
	}
	first, err := scriptedWorker("writer", ids, clock,
		answer("The sea ", "is grey ", "and wide, ", "and cold."),
		answer("The sea ", "rolls grey ", "and wide, ", "and cold."),
		answer("Grey waves ", "roll in, ", "wide ", "and cold."))
	if err != nil {
		return orchestrator.Config{}, err
	}
	second, err := scriptedWorker("reviewer", ids, clock,
		answer("Say more ", "about the waves."),
		answer("Shorter, ", "please."),
		answer(handoff.DefaultDoneMarker))
	return orchestrator.Config{Plans: plans, First: first, Second: second,
		Pattern: orchestrator.ReviewLoop, Task: "Write one line about the sea."}, err
}

// pairPlay plays the job as the scripted pair its spec names, whose
// timeline goes to the events stream.
func pairPlay(b *Backend) PlayFunc {
	return func(ctx context.Context, j job.Job) job.Report {
		rep := job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Failed}
		shape, ok := pairShapes[string(j.Spec)]
		if !ok {
			rep.Error = "no pair shape " + strconv.Quote(string(j.Spec))
			return rep
		}
		c, err := shape.config()
		if err != nil {
			rep.Error = err.Error()
			return rep
		}
		pub, err := b.Timeline(j.ID, TimelineConfig{})
		if err != nil {
			rep.Error = err.Error()
			return rep
		}
		c.ID = j.ID
		c.Timeline.Required = []eventlog.Observer{pub}
		p, err := orchestrator.Run(ctx, c)
		if err != nil {
			rep.Error = err.Error()
			return rep
		}
		res, err := p.Wait(context.Background())
		rep.Reason = res.Reason.String()
		if err != nil {
			rep.Error = err.Error()
			return rep
		}
		rep.State = job.Completed
		return rep
	}
}

// BenchmarkJetStreamPairs: scripted relay pairs of 17 timeline events
// (relayConfig) submitted to an embedded JetStream and played by 2
// worker processes (4 pairs each), each pair's whole timeline carried on
// the events stream; pairs/s from the first submission to the last
// terminal status. The same pairs then play in this process, GOMAXPROCS
// at once, each by orchestrator.Run (the scheduler is on this package's
// layer, which a test may not import), and ratio is JetStream's pairs/s
// over that in-process rate.
func BenchmarkJetStreamPairs(b *testing.B) { benchJetStreamPairs(b, "relay") }

// BenchmarkJetStreamReviewPairs is BenchmarkJetStreamPairs with review
// loops of 60 events (reviewConfig).
func BenchmarkJetStreamReviewPairs(b *testing.B) { benchJetStreamPairs(b, "review") }

func benchJetStreamPairs(b *testing.B, spec string) {
	shape := pairShapes[spec]
	ctx := context.Background()
	s := startServer(b, b.TempDir())
	nc := connect(b, s.ClientURL())
	be, err := Open(ctx, benchConfig(nc))
	require.NoError(b, err)
	var procs []*exec.Cmd
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envURL+"="+s.ClientURL(), envName+"=bench", envPlay+"=pairs")
		out, err := cmd.StdoutPipe()
		require.NoError(b, err)
		require.NoError(b, cmd.Start())
		buf := make([]byte, 6)
		_, err = out.Read(buf)
		require.NoError(b, err)
		procs = append(procs, cmd)
	}
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(os.Interrupt)
			_ = p.Wait()
		}
	}()

	// One watcher counts terminal statuses; submitters keep at most
	// backlog jobs outstanding.
	const backlog, submitters = 256, 8
	w, err := be.kv.WatchFiltered(ctx, []string{"s.>"}, jetstream.UpdatesOnly())
	require.NoError(b, err)
	defer func() { _ = w.Stop() }()
	var ended atomic.Int64
	slots := make(chan struct{}, backlog)
	n := b.N
	allEnded := make(chan struct{})
	go func() {
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			if st, err := decode(e.Value()); err == nil && st.State.Terminal() {
				if st.State != job.Completed {
					b.Errorf("%s: %s %s %s", st.ID, st.State, st.Reason, st.Error)
				}
				<-slots
				if ended.Add(1) == int64(n) {
					close(allEnded)
					return
				}
			}
		}
	}()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range submitters {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				slots <- struct{}{}
				if _, err := be.Submit(ctx, job.Job{ID: "p" + strconv.FormatInt(i, 10), Spec: []byte(spec)}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	<-allEnded
	jsRate := float64(n) / time.Since(start).Seconds()
	b.StopTimer()
	var events int
	for _, err := range be.Events(ctx, "p1", 0, false) {
		require.NoError(b, err)
		events++
	}
	require.Equal(b, shape.events, events, "events of a pair on the stream")
	info, err := be.events.Info(ctx)
	require.NoError(b, err)
	msgs := float64(info.State.Msgs) / float64(n)

	// The baseline: the same pairs played in this process, GOMAXPROCS
	// at once, by orchestrator.Run.
	var played atomic.Int64
	start = time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := played.Add(1)
				if i > int64(n) {
					return
				}
				c, err := shape.config()
				if err != nil {
					b.Error(err)
					return
				}
				c.ID = "inproc-" + strconv.FormatInt(i, 10)
				p, err := orchestrator.Run(ctx, c)
				if err == nil {
					_, err = p.Wait(ctx)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	inRate := float64(n) / time.Since(start).Seconds()
	b.ReportMetric(jsRate, "pairs/s")
	b.ReportMetric(inRate, "inproc-pairs/s")
	b.ReportMetric(jsRate/inRate, "ratio")
	b.ReportMetric(msgs, "msgs/pair")
}
