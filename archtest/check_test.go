package archtest

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fixture is a separate module (testdata/fixture, example.com/fixture)
// that breaks every rule in a known place; everything else in it is clean,
// so an exact match also proves there are no false positives.
func fixtureConfig() Config {
	cfg := Default(filepath.Join("testdata", "fixture"), "example.com/fixture")
	cfg.Exceptions = nil
	return cfg
}

func runCheck(t *testing.T, cfg Config) []Violation {
	t.Helper()
	vs, err := Check(context.Background(), cfg)
	require.NoError(t, err)
	return vs
}

// key is what the fixture tests compare: rule, place and subject.
func key(v Violation) string {
	loc := v.File
	if v.Line > 0 {
		loc += ":" + strconv.Itoa(v.Line)
	}
	return v.Rule + " " + loc + " " + v.Subject
}

func keysOf(vs []Violation, rule string) []string {
	var out []string
	for _, v := range vs {
		if rule == "" || v.Rule == rule {
			out = append(out, key(v))
		}
	}
	return out
}

func TestFixtureReportsEveryRuleExactly(t *testing.T) {
	vs := runCheck(t, fixtureConfig())
	want := map[string][]string{
		RuleKernelImports: {
			"kernel-imports kernel/plan/net.go:3 net/http",
			"kernel-imports kernel/plan/gen.go:5 os", // a build-ignored file is kernel code too
			"kernel-imports kernel/plan/plan_test.go:8 example.com/fixture/workers/w",
			"kernel-imports kernel/leak/leak.go:3 example.com/fixture/store/sqlite",
			"kernel-imports kernel/leak/lib.go:3 example.org/lib",
		},
		RuleKernelDeps: {
			"kernel-deps kernel/leak example.com/fixture/store/sqlite",
			"kernel-deps kernel/leak example.org/lib",
		},
		RuleKernelWords: {
			"kernel-words kernel/plan/run.go:4 parent",     // type ParentRun
			"kernel-words kernel/plan/run.go:5 worker",     // field WorkerID
			"kernel-words kernel/plan/run.go:5 worker",     // its struct tag
			"kernel-words kernel/plan/run.go:9 pair",       // event kind "pair.started"
			"kernel-words kernel/plan/run.go:11 handoff",   // declaration comment
			"kernel-words kernel/plan/run.go:11 subagent",  // declaration comment, plural
			"kernel-words kernel/plan/run.go:12 handoff",   // method HandOff
			"kernel-words kernel/plan/run.go:12 child",     // parameter children
			"kernel-words kernel/plan/run.go:13 scheduler", // local variable
		},
		RuleKernelGlobals: {
			"kernel-globals kernel/plan/cache.go:8 last",   // an atomic cell
			"kernel-globals kernel/plan/cache.go:10 mu",    // a lock
			"kernel-globals kernel/plan/cache.go:21 hits",  // incremented by a function
			"kernel-globals kernel/plan/cache.go:22 table", // written by a function
		},
		RuleLayerImports: {
			"layer-imports handoff/h.go:3 example.com/fixture/providers/b",
			"layer-imports handoff/x_test.go:6 example.com/fixture/scheduler",
			"layer-imports providers/a/a.go:4 example.com/fixture/providers/b",
			"layer-imports tools/t/t.go:3 example.com/fixture/providers/b",
			"layer-imports workers/w/w.go:4 example.com/fixture/orchestrator",
			"layer-imports workers/w/w.go:5 example.org/lib",
		},
		RuleLayerUnknown: {
			"layer-unknown unlisted/p unlisted/p",
		},
	}
	var all []string
	for rule, keys := range want {
		t.Run(rule, func(t *testing.T) {
			require.ElementsMatch(t, keys, keysOf(vs, rule))
		})
		all = append(all, keys...)
	}
	require.ElementsMatch(t, all, keysOf(vs, ""), "no other rule and no clean package may report anything")
}

func TestFixtureMessagesNameFileLineAndRule(t *testing.T) {
	vs := runCheck(t, fixtureConfig())
	var lines []string
	for _, v := range vs {
		lines = append(lines, v.String())
	}
	require.Contains(t, lines, `kernel/plan/net.go:3: rule kernel-imports: imports "net/http", `+
		`which is not on the kernel allow-list of standard-library packages (archtest.KernelStd)`)
	require.Contains(t, lines, `kernel/plan/run.go:4: rule kernel-words: type name "ParentRun" contains the forbidden word "parent"`)
	require.Contains(t, lines, `kernel/plan/run.go:12: rule kernel-words: parameter name "children" contains the forbidden word "child" (as "children")`)
	require.Contains(t, lines, `workers/w/w.go:4: rule layer-imports: imports "example.com/fixture/orchestrator" `+
		`from orchestrator (layer 5), but workers (layer 4) may import only kernel`)
	require.Contains(t, lines, `providers/a/a.go:4: rule layer-imports: imports "example.com/fixture/providers/b", `+
		`but adapters do not import each other: providers/a may import only its own packages and providers/internal/...`)
}

func TestExceptionsExcuseAndStaleOnesAreReported(t *testing.T) {
	cfg := fixtureConfig()
	cfg.Exceptions = []Exception{
		{Rule: RuleKernelWords, File: "kernel/plan/run.go", Subject: "pair", Reason: "test"},
		{Rule: RuleKernelImports, File: "kernel/plan/net.go", Subject: "os", Reason: "test: excuses nothing"},
	}
	keys := keysOf(runCheck(t, cfg), "")
	require.NotContains(t, keys, "kernel-words kernel/plan/run.go:9 pair")
	require.Contains(t, keys, "kernel-words kernel/plan/run.go:4 parent", "an exception excuses only its own subject")
	require.Contains(t, keys, "exception-unused kernel/plan/net.go os")
}

func TestConfigErrors(t *testing.T) {
	cases := map[string]func(*Config){
		"no root":              func(c *Config) { c.Root = "" },
		"no module":            func(c *Config) { c.Module = "" },
		"exception w/o reason": func(c *Config) { c.Exceptions = []Exception{{Rule: RuleKernelWords, File: "f.go", Subject: "pair"}} },
		"unknown may-import": func(c *Config) {
			c.Units = append(c.Units, Unit{Dir: "extra", Level: 2, MayImport: []string{"nowhere"}})
		},
		"folder listed twice":  func(c *Config) { c.Units = append(c.Units, Unit{Dir: "kernel", Level: 1}) },
		"no kernel":            func(c *Config) { c.Units = c.Units[:len(c.Units)-2] },
		"two kernels":          func(c *Config) { c.Units = append(c.Units, Unit{Dir: "core", Level: 1, Kernel: true}) },
		"go command not found": func(c *Config) { c.Go = filepath.Join(t.TempDir(), "no-go") },
		"root is not a module": func(c *Config) { c.Root = t.TempDir() },
		"wrong module path":    func(c *Config) { c.Module = "example.com/other" },
		"root does not exist":  func(c *Config) { c.Root = filepath.Join(t.TempDir(), "missing") },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := fixtureConfig()
			mutate(&cfg)
			vs, err := Check(context.Background(), cfg)
			require.Error(t, err)
			require.Nil(t, vs)
		})
	}
}

func TestCheckDoesNotChangeTheCallersTable(t *testing.T) {
	cfg := fixtureConfig()
	runCheck(t, cfg)
	require.Equal(t, Layers(), cfg.Units)
}
