package scripted_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/providers/scripted"
)

func modelUsage(in, out int64) (model.Usage, error) { return model.NewUsage(in, out) }

func TestBuiltin_ScriptsAreValidAndNameOnlyTheCompiledTools(t *testing.T) {
	w, r := scripted.Builtin()
	require.NoError(t, w.Validate())
	require.NoError(t, r.Validate())
	require.Equal(t, []string{"fs.write"}, w.ToolNames())
	require.Equal(t, []string{"fs.read", "text.stats"}, r.ToolNames())
	require.Equal(t, []string{"fs.read", "fs.write", "text.stats"}, scripted.BuiltinToolNames())
	require.NotEqual(t, scripted.WriterName, scripted.ReviewerName)
}

func TestBuiltin_MarkersAppearWhereTheRulesNeedThem(t *testing.T) {
	w, r := scripted.Builtin()
	texts := func(s scripted.Script) (out []string) {
		for _, st := range s.Steps {
			out = append(out, st.Text)
			for _, c := range st.Calls {
				out = append(out, string(c.Arguments))
			}
		}
		return out
	}
	// Only the reviewer's last answer approves.
	var approving []string
	for _, s := range append(texts(w), texts(r)...) {
		if strings.Contains(s, scripted.DoneMarker) {
			approving = append(approving, s)
		}
	}
	require.Equal(t, []string{r.Steps[len(r.Steps)-1].Text}, approving)
	// The writer's first answer neither looks like a revision nor like
	// feedback; its revised answer starts with the revision marker.
	require.NotContains(t, w.Steps[1].Text, scripted.RevisionMarker)
	require.NotContains(t, w.Steps[1].Text, scripted.FeedbackMarker)
	require.True(t, strings.HasPrefix(w.Steps[3].Text, scripted.RevisionMarker))
	require.Contains(t, r.Steps[1].Text, scripted.FeedbackMarker)
}

func TestBuiltin_ReviewerCountsTheDraftTheWriterWrote(t *testing.T) {
	w, r := scripted.Builtin()
	arg := func(c scripted.CallSpec, key string) string {
		var m map[string]string
		require.NoError(t, json.Unmarshal(c.Arguments, &m))
		return m[key]
	}
	for round := range 2 {
		write := w.Steps[2*round].Calls[0]
		require.Equal(t, "fs.write", write.Name)
		require.Equal(t, scripted.DraftPath, arg(write, "path"))
		draft := arg(write, "content")
		require.True(t, strings.HasSuffix(w.Steps[2*round+1].Text, draft))

		review := r.Steps[2*round].Calls
		require.Equal(t, "fs.read", review[0].Name)
		require.Equal(t, scripted.DraftPath, arg(review[0], "path"))
		require.Equal(t, "text.stats", review[1].Name)
		require.Equal(t, draft, arg(review[1], "text"))
	}
}

func TestBuiltin_ReturnsFreshCopies(t *testing.T) {
	w, _ := scripted.Builtin()
	w.Steps[0].Calls[0].Arguments[0] = '['
	w.Steps[1].Text = "changed"
	again, _ := scripted.Builtin()
	require.NoError(t, again.Validate())
	require.NotEqual(t, "changed", again.Steps[1].Text)
	js := scripted.BuiltinJSON()
	js[0] = 'x'
	require.Equal(t, byte('{'), scripted.BuiltinJSON()[0])
}
