package acceptance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/proof/boundary"
)

var (
	writeLedger   = flag.Bool("ledger", false, "write proof/LEDGER.md from this run, also when it fails (make proof)")
	ledgerOut     = flag.String("ledger-path", "", "write the ledger here instead of proof/LEDGER.md (with -ledger)")
	writeBaseline = flag.Bool("baseline", false, "renew the kernel baselines from the tree (a deliberate kernel change)")
	injectFault   = flag.String("fault", "", "break the suite on purpose: plugin-exits (its plugin exits before the handshake)")
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}

// allParts are the rows of the ledger, in order.
var allParts = []struct{ name, part string }{
	{"persistence_observer", PartObserver},
	{"timeline_replay", PartReplay},
	{"alternate_client", PartClient},
	{"real_provider", PartProvider},
	{"compiled_tool", PartTool},
	{"runtime_tool", PartRuntime},
	{"two_worker_extension", PartTwoWorker},
	{"cancellation", PartCancel},
	{"panic_containment", PartPanic},
	{"snapshot_round_trip", PartSnapshot},
	{"no_kernel_change", PartKernel},
}

// proof collects the parts' results for the ledger.
type proof struct {
	t        *testing.T
	ledger   Ledger
	filtered bool // a -run filter left a part out
}

// part runs one part as a subtest and records its row: the evidence f
// computed from its check, or the check's failure.
func (p *proof) part(name, part string, f func(t *testing.T) (string, error)) {
	test := "TestBoundaryProof/" + name
	row := PartResult{Part: part, Test: test, Result: ResultFail, Evidence: "failed: the check stopped before it reported (see the test log)"}
	ran := false
	p.t.Run(name, func(t *testing.T) {
		ran = true
		ev, err := f(t)
		row = Row(part, test, ev, err)
		if err != nil {
			t.Fatal(err)
		}
	})
	if !ran {
		p.filtered = true
		row = PartResult{Part: part, Test: test, Result: ResultNotRun, Evidence: "a -run filter left it out"}
	}
	p.ledger.Parts = append(p.ledger.Parts, row)
}

// must stops the suite when a step every part needs failed, and records
// why for the ledger.
func (p *proof) must(err error, what string) {
	p.t.Helper()
	if err != nil {
		p.ledger.Stopped = what + ": " + err.Error()
		p.t.Fatal(what+":", err)
	}
}

// TestBoundaryProof is the boundary proof's acceptance evidence in one
// suite: one
// pair exercises the real provider, a compiled tool, a runtime tool (a
// plugin process), the required persistence observer, the timeline's
// clients (the serve SSE API among them) and the two-worker review loop;
// then the same pair is cancelled at every timeline boundary and panicked
// in its provider, its compiled tool and a plugin process; a run of it
// makes a snapshot round trip; and the kernel is shown unchanged. The
// results are the ledger (proof/LEDGER.md), written with -ledger however
// the suite ends, and otherwise compared with the committed one.
func TestBoundaryProof(t *testing.T) {
	ctx := context.Background()
	root := moduleRoot(t)
	p := &proof{t: t, ledger: Ledger{GoVersion: runtime.Version(), RaceDetector: raceEnabled}}
	defer p.finish(ctx, root)

	rt, err := runtimePartErr(t, FixturePlugin, "fixture")
	p.must(err, "building the runtime tool's plugin")
	if *injectFault == "plugin-exits" {
		rt, err = exitingPluginPart(t)
		p.must(err, "writing the plugin that exits")
	}
	client := alternateClient(t)
	played, err := Play(ctx, Config{Dir: t.TempDir(), Runtime: rt, Client: client})
	p.ledger.Outcomes.Plays++
	if played != nil {
		t.Cleanup(func() { require.NoError(t, played.Close()) })
	}
	p.must(err, "playing the pair")
	st := played.Store
	summary, timelineErr := CheckTimeline(played.Subscribed)

	p.part("persistence_observer", PartObserver, func(t *testing.T) (string, error) {
		return fmt.Sprintf("store.Store required on both workers and the timeline: %d events in %d logs acknowledged, each in the SQLite file in order, byte for byte",
			played.Acked.Count(), len(played.Acked.Logs())), CheckObserver(ctx, played, st)
	})
	p.part("timeline_replay", PartReplay, func(t *testing.T) (string, error) {
		return fmt.Sprintf("%d timeline events: the in-process subscriber's bytes equal `runs replay --json` (store.ReplayJSON)", summary.Events), CheckReplay(ctx, played, st)
	})
	p.part("alternate_client", PartClient, func(t *testing.T) (string, error) {
		return client.Name() + ", the real server package on 127.0.0.1:0 running the pair with its feed after the store, read by net/http: the in-process subscriber's timeline byte for byte", CheckClient(played, client)
	})
	p.part("real_provider", PartProvider, func(t *testing.T) (string, error) {
		return fmt.Sprintf("providers/openai over HTTP to 2 loopback SSE servers playing OpenAI, vLLM and Ollama transcripts, %d requests, each checked by its server: the writer's key (none to Ollama), `stream: true`, the %d tools of the leased plan, the conversation with the handoff messages and tool results byte for byte; fs.write arguments split across chunks; usage (prompt/completion tokens) from each last chunk: %s",
			played.Requests[0]+played.Requests[1], len(played.Tools), usageText(played.Usage)), CheckProvider(played)
	})
	p.part("compiled_tool", PartTool, func(t *testing.T) (string, error) {
		return fmt.Sprintf("fs.write called twice by the writer, the file holding the second draft; every run on plan %s (fingerprint %s)", played.Plan.ID, played.Plan.Fingerprint), CheckTool(played)
	})
	p.part("runtime_tool", PartRuntime, func(t *testing.T) (string, error) {
		if err := CheckRuntime(played, rt); err != nil {
			return "", err
		}
		return runtimeEvidence(&p.ledger, played.Runtime), nil
	})
	p.part("two_worker_extension", PartTwoWorker, func(t *testing.T) (string, error) {
		if timelineErr != nil {
			return "", wrap(PartTwoWorker, timelineErr)
		}
		return fmt.Sprintf("review loop writer, reviewer, writer, reviewer: first draft rejected, second approved; %d handoffs, pair.completed approved after 2 rounds", summary.Handoffs), CheckTwoWorker(played)
	})

	o := &p.ledger.Outcomes
	p.part("cancellation", PartCancel, func(t *testing.T) (string, error) {
		if timelineErr != nil {
			return "", wrap(PartCancel, timelineErr)
		}
		for k := uint64(1); k < uint64(summary.Events); k++ {
			c := &CancelAt{Seq: k}
			pl, err := Play(ctx, Config{Dir: t.TempDir(), Runtime: rt, Timeline: []eventlog.Observer{c}, Cancel: c.Bind})
			o.Plays++
			if err != nil {
				return "", wrap(PartCancel, fmt.Errorf("cancelled after event %d: %w", k, err))
			}
			o.CancelPoints++
			err = CheckCancelled(pl, k)
			if err == nil {
				err = CheckObserver(ctx, pl, pl.Store)
			}
			if err == nil {
				err = CheckReplay(ctx, pl, pl.Store)
			}
			if err == nil && !c.Fired() {
				err = fail(PartCancel, "the cancellation after event %d was not injected", k)
			}
			if err == nil {
				switch s, _ := CheckTimeline(pl.Subscribed); s.Reason {
				case "cancelled":
					o.Cancelled++
				case "approved":
					o.Decided++
				}
			}
			err = errors.Join(err, pl.Close())
			if err != nil {
				return "", wrap(PartCancel, err)
			}
		}
		return fmt.Sprintf("the pair cancelled after each of its %d timeline events but the last: %d ended pair.cancelled, %d after every run had ended (approved); one terminal per lifecycle, no run started after the cancellation, the store and the replay equal the timeline", o.CancelPoints, o.Cancelled, o.Decided), nil
	})
	p.part("panic_containment", PartPanic, func(t *testing.T) (string, error) {
		type injection struct {
			what      string
			cfg       Config
			uncertain int
		}
		var inj []injection
		for i := range int64(len(played.Usage)) {
			pp := &PanicProvider{At: i + 1}
			inj = append(inj, injection{fmt.Sprintf("provider panic in model operation %d", i+1), Config{Runtime: rt, Provider: pp.Wrap}, 0})
		}
		for i := range int64(2) {
			pt := &PanicTool{At: i + 1}
			inj = append(inj, injection{fmt.Sprintf("fs.write panic in call %d", i+1), Config{Runtime: rt, Tool: pt.Wrap}, 1})
		}
		// The reviewer's plugin call panics inside the plugin process: the
		// SDK contains it, the host reports the mutating call uncertain,
		// and it is never run again.
		panicky, err := runtimePartErr(t, PanicPlugin, "panicky")
		if err != nil {
			return "", wrap(PartPanic, err)
		}
		inj = append(inj, injection{"plugin tool panic in echo", Config{Runtime: panicky}, 1})
		for _, in := range inj {
			in.cfg.Dir = t.TempDir()
			pl, err := Play(ctx, in.cfg)
			o.Plays++
			if err != nil {
				return "", wrap(PartPanic, fmt.Errorf("%s: %w", in.what, err))
			}
			o.Panics++
			err = CheckPanicked(pl, in.what, in.uncertain)
			if err == nil && pl.Runtime != nil && pl.Runtime.Err != nil {
				err = pl.Runtime.Err
			}
			err = errors.Join(err, pl.Close())
			if err != nil {
				return "", wrap(PartPanic, err)
			}
			o.Contained++
		}
		return fmt.Sprintf("a panic in each of the %d model operations (mid-stream), after each of the 2 fs.write calls and inside the plugin process in its echo call: %d of %d ended pair.failed worker_failed once, the panicking call uncertain and never re-run, no panic text in any event", len(played.Usage), o.Contained, o.Panics), nil
	})
	p.part("snapshot_round_trip", PartSnapshot, func(t *testing.T) (string, error) {
		tr, err := CheckSnapshotTrip(ctx, t.TempDir())
		if err != nil {
			return "", err
		}
		p.ledger.Trip = &tr
		return fmt.Sprintf("the writer's first run, played alone on the pair's writer parts, suspended after turn 1, snapshotted, resumed in a fresh engine and finished: its %d events equal the uninterrupted run's byte for byte", tr.Events), nil
	})
	p.part("no_kernel_change", PartKernel, func(t *testing.T) (string, error) {
		if *writeBaseline {
			writeBaselines(t, root)
		}
		r, err := CheckKernel(ctx, root)
		p.ledger.Kernel = r
		return fmt.Sprintf("kernel API = archtest's golden file = baseline (%d entries with signatures, field types and constant values); %d kernel dependencies, all kernel packages; no forbidden words", r.APIEntries, len(r.Deps)), err
	})
}

// finish completes the ledger however the suite ended, then writes it
// (-ledger) or compares it with the committed one.
func (p *proof) finish(ctx context.Context, root string) {
	t := p.t
	have := make(map[string]bool)
	for _, r := range p.ledger.Parts {
		have[r.Part] = true
	}
	for _, a := range allParts {
		if !have[a.part] {
			why := "the suite stopped before this part"
			if p.ledger.Stopped != "" {
				why += " (" + cell(p.ledger.Stopped) + ")"
			}
			p.ledger.Parts = append(p.ledger.Parts, PartResult{Part: a.part, Test: "TestBoundaryProof/" + a.name, Result: ResultNotRun, Evidence: why})
		}
	}
	l := p.ledger
	var errs []error
	goCmd, err := GoCommand()
	errs = append(errs, err)
	if err == nil {
		l.Modules, err = ModuleVersions(ctx, goCmd, root)
		errs = append(errs, err)
		l.Tree, err = TreeDigest(ctx, goCmd, root)
		errs = append(errs, err)
	}
	l.Transcripts, err = TranscriptDigests()
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		t.Error("completing the ledger:", err)
		if l.Stopped == "" {
			l.Stopped = "completing the ledger: " + err.Error()
		}
	}
	fresh := l.Render()
	if *writeLedger {
		path := *ledgerOut
		if path == "" {
			path = filepath.Join(root, LedgerPath)
		}
		if err := os.WriteFile(path, fresh, 0o644); err != nil {
			t.Error(err)
			return
		}
		t.Logf("wrote %s", path)
		return
	}
	switch {
	case p.filtered:
		t.Log("the ledger is not compared: a -run filter left a part out")
	case t.Failed():
		t.Log("the ledger is not compared: the suite failed")
	case !raceEnabled:
		t.Log("the ledger is measured under -race (make proof, make test); not compared")
	default:
		committed, err := os.ReadFile(filepath.Join(root, LedgerPath))
		if err != nil {
			t.Error(fail(PartLedger, "%s is missing: run make proof", LedgerPath))
			return
		}
		if d := StaleLines(committed, fresh); d != nil {
			t.Error(fail(PartLedger, "%s is stale for this tree: run make proof and commit it\n%s", LedgerPath, strings.Join(d, "\n")))
		}
	}
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

func usageText(us [][2]int) string {
	parts := make([]string, len(us))
	for i, u := range us {
		parts[i] = fmt.Sprintf("%d/%d", u[0], u[1])
	}
	return strings.Join(parts, ", ")
}
