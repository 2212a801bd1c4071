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

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/workers"
)

// envPlay set to "pairs" makes a worker process play scripted relay
// pairs, each one's timeline published to the events stream.
const envPlay = "SPICE_JS_TEST_WORKER_PLAY"

// benchConfig is the backend of the benchmark and its worker processes:
// the default limits and AckWait, so that a loaded machine does not
// redeliver.
func benchConfig(nc *nats.Conn) Config { return Config{Conn: nc, Name: "bench", MaxAge: time.Hour} }

// relayConfig is a relay pair of two text workers on cycling scripted
// providers, as the scheduler's throughput benchmark plays.
func relayConfig() (orchestrator.Config, error) {
	plans, err := enginetest.Plan("plan-1")
	if err != nil {
		return orchestrator.Config{}, err
	}
	ids, clock := &id.Counter{}, &enginetest.Clock{}
	worker := func(role, text string) (workers.Config, error) {
		p := enginetest.NewProvider(enginetest.Answer(text))
		p.Cycle = true
		d, err := engine.NewDefinition(engine.DefinitionConfig{Name: role, Model: "scripted-1", System: "Be brief.", MaxTurns: 4})
		return workers.Config{Role: role, Definition: d, Engine: engine.Config{Provider: p, IDs: ids, Clock: clock}}, err
	}
	first, err := worker("writer", "Hello there.")
	if err != nil {
		return orchestrator.Config{}, err
	}
	second, err := worker("reviewer", "Looks good.")
	return orchestrator.Config{Plans: plans, First: first, Second: second,
		Pattern: orchestrator.Relay, Task: "Write one line about the sea."}, err
}

// pairPlay plays the job as a scripted relay pair whose timeline goes to
// the events stream.
func pairPlay(b *Backend, cfg orchestrator.Config) PlayFunc {
	return func(ctx context.Context, j job.Job) job.Report {
		rep := job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Failed}
		pub, err := b.Timeline(j.ID, TimelineConfig{})
		if err != nil {
			rep.Error = err.Error()
			return rep
		}
		c := cfg
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

// BenchmarkJetStreamPairs: scripted relay pairs submitted to an
// embedded JetStream and played by 2 worker processes (4 pairs each),
// each pair's whole timeline carried on the events stream; pairs/s from
// the first submission to the last terminal status. The same pairs then
// play in this process, GOMAXPROCS at once, and ratio is JetStream's
// pairs/s over that in-process rate.
func BenchmarkJetStreamPairs(b *testing.B) {
	ctx := context.Background()
	s, err := StartEmbedded(EmbeddedConfig{Dir: b.TempDir()})
	require.NoError(b, err)
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	nc, err := nats.Connect(s.ClientURL())
	require.NoError(b, err)
	defer nc.Close()
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
				if _, err := be.Submit(ctx, job.Job{ID: "p" + strconv.FormatInt(i, 10), Spec: []byte("relay")}); err != nil {
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

	// The same pairs played in this process, GOMAXPROCS at once, as the
	// in-process scheduler plays them (its package is on this one's
	// layer, so the benchmark cannot import it): the baseline.
	cfg, err := relayConfig()
	require.NoError(b, err)
	var played atomic.Int64
	start = time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := played.Add(1)
				if i > int64(n) {
					return
				}
				c := cfg
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
}
