package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A failed pair says which bound ended it, and its value.
func TestFailureReasonsSayWhichBoundAndItsValue(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct{ spec, want string }{
		"handoff_rejected": {validSpec + "handoff: {max_bytes: 64, over_bound: error}\n",
			"pair ended: handoff_rejected (worker writer): the handoff policy refused the answer: handoff.content: too large ("},
		"budget_exhausted": {validSpec + "limits: {budget: {tool_calls: 1}}\n",
			"the models asked for more than the budget of 1 tool call (limits.budget.tool_calls)"},
		"max_rounds": {"pattern: review\nworkers:\n  - role: writer\n    provider: scripted\n    script: [{text: A draft.}]\n" +
			"  - role: critic\n    provider: scripted\n    script: [{text: Not yet.}]\nlimits: {max_rounds: 1}\n",
			"no approval within 1 round (limits.max_rounds)"},
	} {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, dir, name+".yaml", c.spec)
			_, stderr, code := call(t, nil, "run", path, "--no-store", "--json")
			require.Equal(t, ExitFailed, code, stderr)
			require.Contains(t, stderr, c.want)
		})
	}
}
