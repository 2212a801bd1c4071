package archtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSplitWords(t *testing.T) {
	cases := map[string][]string{
		"ParentRun":      {"parent", "run"},
		"parentRun":      {"parent", "run"},
		"WorkerID":       {"worker", "id"},
		"worker_id":      {"worker", "id"},
		"pair.started":   {"pair", "started"},
		"HTTPServer":     {"http", "server"},
		"Worker2Run":     {"worker", "2", "run"},
		"sha256":         {"sha", "256"},
		"a key/value":    {"a", "key", "value"},
		"// Run is one.": {"run", "is", "one"},
		"":               nil,
		"...":            nil,
	}
	for in, want := range cases {
		require.Equal(t, want, splitWords(in), "splitWords(%q)", in)
	}
}

func TestForbiddenWordsAndTheirForms(t *testing.T) {
	c := &checker{forms: wordForms(ForbiddenWords())}
	found := map[string][]wordMatch{
		"ParentRun":         {{"parent", "parent"}},
		"children":          {{"child", "children"}},
		"WorkerIDs":         {{"worker", "worker"}},
		"pairs":             {{"pair", "pairs"}},
		"pair.started":      {{"pair", "pair"}},
		"HandOff":           {{"handoff", "handoff"}}, // two words joined
		"sub_agents":        {{"subagent", "subagents"}},
		"SWARM":             {{"swarm", "swarm"}},
		"delegation":        {{"delegate", "delegation"}},
		"orchestration":     {{"orchestrator", "orchestration"}},
		"SchedulerQueue":    {{"scheduler", "scheduler"}},
		"pair of pairs":     {{"pair", "pair"}}, // each word once per text
		"parent and worker": {{"parent", "parent"}, {"worker", "worker"}},
	}
	for text, want := range found {
		require.Equal(t, want, c.forbiddenIn(text), "forbiddenIn(%q)", text)
	}
	// Words that merely contain a forbidden word are not forbidden.
	for _, text := range []string{"repair", "Workload", "unpaired", "impair", "Pairwise", "parenthesis", "schedule", "run.started", "key/value"} {
		require.Empty(t, c.forbiddenIn(text), "forbiddenIn(%q)", text)
	}
}
