package jetstream

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/store"
)

// Environment of a worker process: the test binary re-executed.
const (
	envURL  = "SPICE_JS_TEST_WORKER_URL"
	envName = "SPICE_JS_TEST_WORKER_NAME"
	// A pair worker: its store, the loopback server and the write
	// tool's replay ("idempotent" or "unsafe").
	envStore  = "SPICE_JS_TEST_WORKER_STORE"
	envLoop   = "SPICE_JS_TEST_WORKER_LOOP"
	envReplay = "SPICE_JS_TEST_WORKER_REPLAY"
	// envNoResume leaves WorkerConfig.Resume nil, to show what the
	// tests of D2 prove fails without it.
	envNoResume = "SPICE_JS_TEST_WORKER_NO_RESUME"
	// envResume "events" makes a pair worker one of a fleet without a
	// shared store: envStore, if set, is its own, and it resumes from
	// the events stream; "fleet" likewise, publishing with the default
	// batching; "either" resumes from envStore when it holds the pair
	// and from the stream otherwise; "store" resumes from envStore only,
	// as a worker did before it could resume from the stream, to show
	// what the tests of resuming from the stream prove fails without it.
	envResume = "SPICE_JS_TEST_WORKER_RESUME"
	// envTag names the worker process to the loopback server.
	envTag = "SPICE_JS_TEST_WORKER_TAG"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(envURL); url != "" {
		os.Exit(workerMain(url, os.Getenv(envName)))
	}
	goleak.VerifyTestMain(m)
}

// workerMain is a worker process: it plays scripted jobs until SIGTERM.
// A job whose spec is "block" plays until it is cancelled; any other
// completes at once.
func workerMain(url, name string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	opts := []nats.Option{nats.MaxReconnects(-1)}
	if name == restartName {
		// Back soon after the server restarts, well within AckWait.
		opts = append(opts, nats.ReconnectWait(50*time.Millisecond))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer nc.Close()
	cfg := testConfig(nc, name)
	switch {
	case os.Getenv(envPlay) == "pairs":
		cfg = benchConfig(nc)
	case name == chaosName:
		cfg = chaosConfig(nc)
	case name == restartName:
		cfg = restartConfig(nc)
	}
	b, err := Open(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	wc := WorkerConfig{Pairs: 2, Play: scripted, Drain: testDrain}
	if os.Getenv(envPlay) == "pairs" {
		wc.Play, wc.Pairs = pairPlay(b), 4
	}
	if loop := os.Getenv(envLoop); loop != "" {
		workerTag = os.Getenv(envTag)
		recordAttempt = b.Attempt
		var st *store.Store
		if path := os.Getenv(envStore); path != "" {
			if st, err = store.Open(ctx, path); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
			defer st.Close()
		}
		var replay tool.Replay // "spec": the job's spec says
		switch os.Getenv(envReplay) {
		case "idempotent":
			replay = tool.Idempotent
		case "unsafe":
			replay = tool.Unsafe
		}
		build := pairBuilder(st, loop, replay)
		wc.Play = playPair(build)
		if os.Getenv(envNoResume) == "" {
			wc.Resume = ResumeFromStore(st, build)
		}
		if mode := os.Getenv(envResume); mode != "" {
			// Events reach the stream only at tool starts and terminals:
			// what a resume finds there does not depend on timing. A
			// fleet ("fleet") publishes as a worker does by default.
			tc := TimelineConfig{Batch: MaxBatch, Linger: time.Hour}
			if mode == "fleet" {
				// Its pairs end by themselves: a drain waits for them.
				tc, wc.Drain = TimelineConfig{}, 20*time.Second
			}
			wc.Play = playStreamed(b, build, tc)
			switch {
			case os.Getenv(envNoResume) != "", mode == "store":
			case mode == "either":
				wc.Resume = b.ResumeFromStoreOrEvents(st, build, pairBuilder(nil, loop, replay), tc)
			default:
				wc.Resume = b.ResumeFromEvents(pairBuilder(nil, loop, replay), tc)
			}
		}
	}
	fmt.Println("ready")
	if err := b.Work(ctx, wc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// testDrain is a worker process's drain bound, and drainMargin how much
// longer than it the process may take to exit after SIGTERM.
const (
	testDrain   = 2 * time.Second
	drainMargin = 3 * time.Second
)

// testConfig is the backend configuration every test and worker process
// shares: a short AckWait, so that redelivery is quick.
func testConfig(nc *nats.Conn, name string) Config {
	return Config{Conn: nc, Name: name, MaxJobs: 10_000, MaxAge: time.Hour, AckWait: 500 * time.Millisecond, MaxDeliver: 3}
}

// chaosConfig is testConfig with a longer AckWait: on a loaded machine
// a live worker's heartbeat must not be late enough to have its pair
// taken from it.
func chaosConfig(nc *nats.Conn) Config {
	cfg := testConfig(nc, chaosName)
	cfg.AckWait = 2 * time.Second
	return cfg
}

func scripted(ctx context.Context, j job.Job) job.Report {
	if string(j.Spec) == "block" {
		<-ctx.Done()
		return job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Cancelled, Reason: "cancelled"}
	}
	return job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Completed, Reason: "completed"}
}
