package acceptance

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/proof/boundary"
)

var (
	writeLedger   = flag.Bool("ledger", false, "write proof/LEDGER.md from this run (make proof)")
	writeBaseline = flag.Bool("baseline", false, "renew the kernel baselines from the tree (a deliberate kernel change)")
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}

// proof collects the parts' results for the ledger.
type proof struct {
	t      *testing.T
	ledger Ledger
	all    bool // every part ran (no -run filter left one out)
}

// part runs one part as a subtest and records its result.
func (p *proof) part(name, part, evidence string, f func(t *testing.T) string) {
	ran := false
	ok := p.t.Run(name, func(t *testing.T) {
		ran = true
		if e := f(t); e != "" {
			evidence = e
		}
	})
	if !ran {
		p.all = false
		return
	}
	res := ResultPass
	if !ok {
		res = ResultFail
	}
	p.ledger.Parts = append(p.ledger.Parts, PartResult{Part: part, Test: "TestBoundaryProof/" + name, Result: res, Evidence: evidence})
}

// requirePart fails t with err, whose message names its part.
func requirePart(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestBoundaryProof is RFC 0001's acceptance evidence in one suite: one
// pair exercises the real provider, a compiled tool, a runtime tool (a
// plugin process), the required persistence observer, the timeline's
// clients (the serve SSE API among them) and the two-worker review loop;
// then the same pair is cancelled at every timeline boundary and panicked
// in its provider, its compiled tool and a plugin process; and the kernel
// is shown unchanged. The results are the ledger (proof/LEDGER.md), which
// must be current.
func TestBoundaryProof(t *testing.T) {
	ctx := context.Background()
	root := moduleRoot(t)
	p := &proof{t: t, all: true}
	p.ledger.GoVersion = runtime.Version()
	p.ledger.RaceDetector = raceEnabled

	rt, client := runtimeToolPart(t), alternateClient(t)
	played, err := Play(ctx, Config{Dir: t.TempDir(), Runtime: rt, Client: client})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, played.Close()) })
	st := played.Store
	summary, timelineErr := CheckTimeline(played.Subscribed)
	runs := 1

	p.part("persistence_observer", PartObserver, "", func(t *testing.T) string {
		requirePart(t, CheckObserver(ctx, played, st))
		return fmt.Sprintf("store.Store required on both workers and the timeline: %d events in %d logs acknowledged, each in the SQLite file in order, byte for byte",
			played.Acked.Count(), len(played.Acked.Logs()))
	})
	p.part("timeline_replay", PartReplay, "", func(t *testing.T) string {
		requirePart(t, CheckReplay(ctx, played, st))
		return fmt.Sprintf("%d timeline events: the in-process subscriber's bytes equal `runs replay --json` (store.ReplayJSON)", summary.Events)
	})
	p.part("alternate_client", PartClient, "", func(t *testing.T) string {
		requirePart(t, CheckClient(played, client))
		return client.Name() + ", the real server package on 127.0.0.1:0 running the pair with its feed after the store, read by net/http: the in-process subscriber's timeline byte for byte"
	})
	p.part("real_provider", PartProvider, "", func(t *testing.T) string {
		requirePart(t, CheckProvider(played))
		return fmt.Sprintf("providers/openai over HTTP to 2 loopback SSE servers, %d requests: OpenAI and vLLM transcripts with fs.write arguments split across chunks, Ollama's; usage (prompt/completion tokens) from each last chunk: %s", len(played.Usage), usageText(played.Usage))
	})
	p.part("compiled_tool", PartTool, "", func(t *testing.T) string {
		requirePart(t, CheckTool(played))
		return fmt.Sprintf("fs.write called twice by the writer, every run on plan %s (fingerprint %s)", played.Plan.ID, played.Plan.Fingerprint)
	})
	p.part("runtime_tool", PartRuntime, "", func(t *testing.T) string {
		requirePart(t, CheckRuntime(played, rt))
		return runtimeEvidence(&p.ledger, played.Runtime)
	})
	p.part("two_worker_extension", PartTwoWorker, "", func(t *testing.T) string {
		require.NoError(t, timelineErr)
		requirePart(t, CheckTwoWorker(played))
		return fmt.Sprintf("review loop writer, reviewer, writer, reviewer: first draft rejected, second approved; %d handoffs, pair.completed approved after 2 rounds", summary.Handoffs)
	})

	boundaries := 0
	p.part("cancellation", PartCancel, "", func(t *testing.T) string {
		require.NoError(t, timelineErr)
		for k := uint64(1); k < uint64(summary.Events); k++ {
			c := &CancelAt{Seq: k}
			pl, err := Play(ctx, Config{Dir: t.TempDir(), Runtime: rt, Timeline: []eventlog.Observer{c}, Cancel: c.Bind})
			require.NoError(t, err)
			runs++
			err = CheckCancelled(pl, k)
			if err == nil {
				err = CheckObserver(ctx, pl, pl.Store)
			}
			if err == nil {
				err = CheckReplay(ctx, pl, pl.Store)
			}
			require.NoError(t, pl.Close())
			require.True(t, c.Fired(), "the cancellation after event %d was not injected", k)
			requirePart(t, err)
			boundaries++
		}
		return fmt.Sprintf("the pair cancelled after each of its %d timeline events but the last: one terminal per lifecycle and one pair.cancelled each time, no run started after it, the store and the replay still equal the timeline", boundaries)
	})
	panics := 0
	p.part("panic_containment", PartPanic, "", func(t *testing.T) string {
		for i := range int64(len(played.Usage)) {
			pp := &PanicProvider{At: i + 1}
			pl, err := Play(ctx, Config{Dir: t.TempDir(), Runtime: rt, Provider: pp.Wrap})
			require.NoError(t, err)
			runs++
			err = CheckPanicked(pl, fmt.Sprintf("provider panic in model operation %d", i+1), 0)
			require.NoError(t, pl.Close())
			requirePart(t, err)
			panics++
		}
		for i := range int64(2) {
			pt := &PanicTool{At: i + 1}
			pl, err := Play(ctx, Config{Dir: t.TempDir(), Runtime: rt, Tool: pt.Wrap})
			require.NoError(t, err)
			runs++
			err = CheckPanicked(pl, fmt.Sprintf("fs.write panic in call %d", i+1), 1)
			require.NoError(t, pl.Close())
			requirePart(t, err)
			panics++
		}
		// The reviewer's plugin call panics inside the plugin process: the
		// SDK contains it, the host reports the mutating call uncertain,
		// and it is never run again.
		pl, err := Play(ctx, Config{Dir: t.TempDir(), Runtime: runtimePart(t, PanicPlugin, "panicky")})
		require.NoError(t, err)
		runs++
		err = CheckPanicked(pl, "plugin tool panic in echo", 1)
		if err == nil && pl.Runtime.Err != nil {
			err = pl.Runtime.Err
		}
		require.NoError(t, pl.Close())
		requirePart(t, err)
		panics++
		return fmt.Sprintf("a panic in each of the %d model operations (mid-stream), after each of the 2 fs.write calls and inside the plugin process in its echo call: pair.failed worker_failed once, the panicking call uncertain and never re-run, no panic text in any event", len(played.Usage))
	})

	p.part("no_kernel_change", PartKernel, "", func(t *testing.T) string {
		if *writeBaseline {
			writeBaselines(t, root)
		}
		r, err := CheckKernel(ctx, root)
		p.ledger.Kernel = r
		requirePart(t, err)
		return fmt.Sprintf("kernel API = archtest's golden file = baseline (%d entries); %d kernel dependencies, all kernel; %d forbidden words found", r.APIEntries, len(r.Deps), r.Violations)
	})

	if !p.all {
		t.Log("the ledger is not compared: a -run filter left a part out")
		return
	}
	p.ledger.Counts.Runs, p.ledger.Counts.CancelPoints, p.ledger.Counts.PanicPoints = runs, boundaries, panics
	checkLedger(t, ctx, root, p.ledger)
}

func writeBaselines(t *testing.T, root string) {
	golden, err := os.ReadFile(filepath.Join(root, GoldenPath))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile("testdata/kernel_api.baseline", golden, 0o644))
	goCmd, err := GoCommand()
	require.NoError(t, err)
	deps, err := boundary.KernelDeps(context.Background(), goCmd, root)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile("testdata/kernel_deps.baseline", []byte(strings.Join(deps, "\n")+"\n"), 0o644))
	t.Log("renewed the kernel baselines; rebuild and run make proof")
}

// checkLedger completes l with what the tree says and writes it (-ledger)
// or compares it with the committed one.
func checkLedger(t *testing.T, ctx context.Context, root string, l Ledger) {
	goCmd, err := GoCommand()
	require.NoError(t, err)
	l.Modules, err = ModuleVersions(ctx, goCmd, root)
	require.NoError(t, err)
	l.Transcripts, err = TranscriptDigests()
	require.NoError(t, err)
	counts, err := CountTests(root)
	require.NoError(t, err)
	counts.Runs, counts.CancelPoints, counts.PanicPoints = l.Counts.Runs, l.Counts.CancelPoints, l.Counts.PanicPoints
	l.Counts = counts
	l.Date = time.Now().UTC().Format("2006-01-02")
	l.Commit = Commit(ctx, root)
	fresh := l.Render()
	path := filepath.Join(root, LedgerPath)
	if *writeLedger {
		require.NoError(t, os.WriteFile(path, fresh, 0o644))
		t.Logf("wrote %s", LedgerPath)
		return
	}
	if !raceEnabled {
		t.Log("the ledger is measured under -race (make proof, make test); not compared")
		return
	}
	committed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(fail(PartLedger, "%s is missing: run make proof", LedgerPath))
	}
	if d := StaleLines(committed, fresh); d != nil {
		t.Fatal(fail(PartLedger, "%s is stale for this tree: run make proof and commit it\n%s", LedgerPath, strings.Join(d, "\n")))
	}
}

var _ = orchestrator.Terminal

func usageText(us [][2]int) string {
	parts := make([]string, len(us))
	for i, u := range us {
		parts[i] = fmt.Sprintf("%d/%d", u[0], u[1])
	}
	return strings.Join(parts, ", ")
}
