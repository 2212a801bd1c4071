package acceptance

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// Each test here breaks one part on purpose and shows that the suite's
// check fails with a message naming that part.

func requireBreak(t *testing.T, err error, part string, contains ...string) {
	t.Helper()
	require.Error(t, err, "the proof must catch the broken %s", part)
	var pe *PartError
	require.True(t, errors.As(err, &pe), "not a PartError: %v", err)
	require.Equal(t, part, pe.Part, "%v", err)
	require.Contains(t, err.Error(), partNamePrefix+part)
	for _, c := range contains {
		require.Contains(t, err.Error(), c)
	}
}

func goodPlay(t *testing.T, cfg Config) *Played {
	t.Helper()
	cfg.Dir = t.TempDir()
	p, err := Play(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

func TestBreak_StoreRefusesWrites(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "spice.db")
	st, err := store.Open(ctx, path)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	ro, err := store.OpenConfig(ctx, store.Config{Path: path, ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()

	p := goodPlay(t, Config{Store: ro})
	require.Equal(t, orchestrator.ReasonInfrastructure, p.Result.Reason, "a refused pair.started ends the pair")
	requireBreak(t, CheckPlay(ctx, p, ro, nil, nil), PartObserver, "acknowledged no event")
}

// dropClient is an alternate client that misses one event.
type dropClient struct {
	drop uint64
	done chan struct{}
	buf  bytes.Buffer
	err  error
}

func (c *dropClient) Name() string { return "a client that drops an event" }

func (c *dropClient) Attach(ctx context.Context, p *orchestrator.Pair) error {
	sub, err := p.Subscribe(context.WithoutCancel(ctx), 0)
	if err != nil {
		return err
	}
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		defer sub.Close()
		for e, err := range sub.All(context.WithoutCancel(ctx)) {
			if err != nil {
				c.err = err
				return
			}
			if e.Seq() != c.drop {
				c.buf.Write(e.AppendJSON(nil))
				c.buf.WriteByte('\n')
			}
			if orchestrator.Terminal(e.Kind()) {
				return
			}
		}
	}()
	return nil
}

func (c *dropClient) Timeline(context.Context) ([]byte, error) {
	<-c.done
	return c.buf.Bytes(), c.err
}

func TestBreak_AlternateClientMissesAnEvent(t *testing.T) {
	c := &dropClient{drop: 7}
	p := goodPlay(t, Config{Client: c})
	requireBreak(t, CheckPlay(context.Background(), p, p.Store, nil, c), PartClient, c.Name(), "line 7")
}

func TestBreak_ReplayDiffers(t *testing.T) {
	p := goodPlay(t, Config{})
	lines := bytes.SplitAfter(p.Subscribed, []byte("\n"))
	missing := bytes.Join(append(lines[:3:3], lines[4:]...), nil)
	requireBreak(t, CheckClients(PartReplay, p.Subscribed, map[string][]byte{"runs replay --json": missing}), PartReplay, "line 4")
}

// downProvider fails every stream before it starts.
type downProvider struct{}

func (downProvider) Stream(context.Context, model.Request) (model.Stream, error) {
	return nil, must(model.NewProviderError(model.ProviderErrorConfig{Problem: problem.Must("unavailable", "the proof broke the provider")}))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestBreak_ProviderNeverReachesTheServer(t *testing.T) {
	p := goodPlay(t, Config{Provider: func(role string, prov model.Provider) model.Provider {
		if role == "writer" {
			return downProvider{}
		}
		return prov
	}})
	requireBreak(t, CheckPlay(context.Background(), p, p.Store, nil, nil), PartProvider, "received 0 requests")
}

// noopWrite has fs.write's definition but writes nothing: it answers every
// call with a problem.
type noopWrite struct{ tool.Tool }

func (w noopWrite) Execute(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
	return tool.NewProblemResult(call.ID(), problem.Must("io_error", "the proof broke the tool"), "")
}

func TestBreak_CompiledToolWritesNothing(t *testing.T) {
	p := goodPlay(t, Config{Tool: func(t tool.Tool) tool.Tool {
		if t.Definition().Name() == "fs.write" {
			return noopWrite{t}
		}
		return t
	}})
	requireBreak(t, CheckPlay(context.Background(), p, p.Store, nil, nil), PartTool, "fs.write calls completed")
}

func TestBreak_RuntimeToolNeverCalled(t *testing.T) {
	p := goodPlay(t, Config{})
	requireBreak(t, CheckRuntime(p, &RuntimeToolPart{Tools: []string{"text.stats"}}), PartRuntime, "no call of a runtime tool")
}

func TestBreak_PairNotApproved(t *testing.T) {
	p := goodPlay(t, Config{})
	p.Result.Reason, p.Result.Rounds = orchestrator.ReasonMaxRounds, 3
	requireBreak(t, CheckTwoWorker(p), PartTwoWorker, "want approved after 2")
}

func TestBreak_CancellationRunsOn(t *testing.T) {
	p := goodPlay(t, Config{})
	// The uncancelled pair, judged as if cancelled after event 5: runs
	// started after it.
	requireBreak(t, CheckCancelled(p, 5), PartCancel, "a run started at")
}

func TestBreak_PanicNotContained(t *testing.T) {
	p := goodPlay(t, Config{})
	requireBreak(t, CheckPanicked(p, "no panic at all", 0), PartPanic, "want worker_failed")
}

func TestTimelineRulesCatchASecondTerminalAndARerun(t *testing.T) {
	p := goodPlay(t, Config{})
	last := bytes.SplitAfter(p.Subscribed, []byte("\n"))
	term := string(last[len(last)-2])
	again := strings.Replace(term, `"seq":52`, `"seq":53`, 1)
	_, err := CheckTimeline(append(bytes.Clone(p.Subscribed), again...))
	require.ErrorContains(t, err, "is not the last event")

	rerun := `{"seq":1,"kind":"pair.started","payload":{}}
{"seq":2,"kind":"run.started","payload":{"worker":"w","run_id":"r1","run_seq":1,"payload":{"run_id":"r1"}}}
{"seq":3,"kind":"tool.started","payload":{"worker":"w","run_id":"r1","run_seq":2,"payload":{"operation_id":"o1","call_id":"c1","name":"fs.write"}}}
{"seq":4,"kind":"tool.failed","payload":{"worker":"w","run_id":"r1","run_seq":3,"payload":{"operation_id":"o1","call_id":"c1","name":"fs.write","outcome":"uncertain"}}}
{"seq":5,"kind":"tool.started","payload":{"worker":"w","run_id":"r1","run_seq":4,"payload":{"operation_id":"o2","call_id":"c2","name":"fs.write"}}}
`
	_, err = CheckTimeline([]byte(rerun))
	require.ErrorContains(t, err, "after an uncertain failure")
}

// fixture writes a module at a temporary root: go.mod and files.
func fixture(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	files["go.mod"] = "module example.com/fixture\n\ngo 1.26\n"
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	return root
}

func TestBreak_KernelIdentifierNamesAPair(t *testing.T) {
	root := fixture(t, map[string]string{
		"kernel/x/x.go": "package x\n\n// PairState is what a kernel must not know.\ntype PairState int\n\nconst loaded = \"plugin.loaded\"\n",
	})
	var r KernelReport
	requireBreak(t, CheckKernelWords(root, &r), PartKernel, `"PairState"`, `"pair"`, `"plugin"`, "kernel/x/x.go:4")
	require.Len(t, r.Violations, 3) // the comment, the type name, the string
}

func TestBreak_KernelAPIGoldenChanged(t *testing.T) {
	root := fixture(t, map[string]string{
		GoldenPath:      baselineAPI + "kernel/x type PairState\n",
		"kernel/x/x.go": "package x\n",
	})
	var r KernelReport
	requireBreak(t, CheckKernelAPI(root, baselineAPI, &r), PartKernel, "golden file", "added:\n\tkernel/x type PairState")
}

func TestBreak_KernelAPIDiffersFromGolden(t *testing.T) {
	root := fixture(t, map[string]string{
		GoldenPath:      "kernel/x type Run\n",
		"kernel/x/x.go": "package x\n\ntype Run struct{}\n\ntype Extra struct{}\n",
	})
	var r KernelReport
	err := CheckKernelAPI(root, "kernel/x type Run\n", &r)
	requireBreak(t, err, PartKernel, "not archtest's golden file", "kernel/x type Extra")
}

func TestBreak_KernelDependsOnAnotherLayer(t *testing.T) {
	root := fixture(t, map[string]string{
		"lib/lib.go":    "package lib\n\nconst V = 1\n",
		"kernel/x/x.go": "package x\n\nimport \"example.com/fixture/lib\"\n\nconst V = lib.V\n",
	})
	goCmd, err := GoCommand()
	require.NoError(t, err)
	var r KernelReport
	err = CheckKernelDeps(context.Background(), goCmd, root, "example.com/fixture", "example.com/fixture/kernel/x\n", &r)
	requireBreak(t, err, PartKernel, "depends on example.com/fixture/lib")
}

func TestBreak_LedgerStale(t *testing.T) {
	committed := Ledger{Tree: Tree{Digest: "abc", Files: 1, Platform: "p/q"}, Parts: []PartResult{{Part: PartTool, Test: "T", Result: ResultPass}}}.Render()
	require.Nil(t, StaleLines(committed, bytes.Clone(committed)))
	// Every line counts, the tree line too.
	stale := strings.Replace(string(committed), "| pass |", "| FAIL |", 1)
	require.NotNil(t, StaleLines(committed, []byte(stale)))
	require.NotNil(t, StaleLines(committed, append(bytes.Clone(committed), "extra\n"...)))
	retree := strings.Replace(string(committed), ledgerTree, ledgerTree+"0", 1)
	require.NotNil(t, StaleLines(committed, []byte(retree)))
}

func TestLedgerRendersDeterministically(t *testing.T) {
	l := Ledger{Tree: Tree{Digest: "abc", Files: 1, Platform: "p/q"}, Parts: []PartResult{{Part: PartTool, Test: "T", Result: ResultPass}}}
	require.Equal(t, l.Render(), l.Render())
}

func TestBreak_PluginBinaryNotFound(t *testing.T) {
	rt := runtimeToolPart(t)
	// The pinned fixture, configured at a path where there is no file.
	rt.Plugins[0].Path = filepath.Join(t.TempDir(), "goplugin")
	p, err := Play(context.Background(), Config{Dir: t.TempDir(), Runtime: rt})
	require.NoError(t, p.Close())
	requireBreak(t, err, PartRuntime, "starting the plugin host", rt.Plugins[0].Path)
}

func TestBreak_RuntimeToolNotThePinnedBinary(t *testing.T) {
	rt := runtimeToolPart(t)
	p := goodPlay(t, Config{Runtime: rt})
	require.NoError(t, CheckRuntime(p, rt))
	p.Runtime.Digests = []string{strings.Repeat("0", 64)}
	requireBreak(t, CheckRuntime(p, rt), PartRuntime, "pinned "+rt.Plugins[0].SHA256)
}

func TestBreak_ServeClientMissesAnEvent(t *testing.T) {
	c := alternateClient(t)
	p := goodPlay(t, Config{Client: c})
	require.NoError(t, CheckClient(p, c))
	lines := bytes.SplitAfter(p.ClientTimeline, []byte("\n"))
	p.ClientTimeline = bytes.Join(append(lines[:6:6], lines[7:]...), nil)
	requireBreak(t, CheckClient(p, c), PartClient, c.Name(), "line 7")
}
