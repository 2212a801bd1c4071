package tools_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/idempotency"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/tools"
)

func TestR5_ARepeatedWriteOfOneCallIsANoOp(t *testing.T) {
	for _, c := range []struct {
		name    string
		journal bool
	}{{"journal", true}, {"memory", false}} {
		t.Run(c.name, func(t *testing.T) {
			journal := t.TempDir()
			var e *env
			setJournal := func(cfg *tools.Config) {
				if c.journal {
					cfg.Journal = journal
				}
			}
			e = newEnv(t, setJournal)
			ctx := idempotency.WithKey(context.Background(), idempotency.Derive("pair-1", "run-1", "call-1"))
			first, err := e.callCtx(t, ctx, tools.NameFSWrite, args("path", "a.txt", "content", "first"))
			require.NoError(t, err)
			// Something later changed the file; the same call again must
			// not undo that.
			e.write(t, "a.txt", "later")
			before, err := os.Stat(filepath.Join(e.root, "a.txt"))
			require.NoError(t, err)
			if c.journal {
				// A new tool value, as in another process after a resume:
				// the journal remembers.
				ts, err := tools.New(tools.Config{Root: e.root, Journal: journal})
				require.NoError(t, err)
				e.d, err = tool.NewDispatcher(tool.DispatcherConfig{Tools: ts})
				require.NoError(t, err)
			}
			again, err := e.callCtx(t, ctx, tools.NameFSWrite, args("path", "a.txt", "content", "first"))
			require.NoError(t, err)
			require.Equal(t, first.Content(), again.Content())
			require.Equal(t, "later", e.read(t, "a.txt"), "the repeat wrote nothing")
			after, err := os.Stat(filepath.Join(e.root, "a.txt"))
			require.NoError(t, err)
			require.True(t, os.SameFile(before, after), "the file was not replaced")
			e.requireNoTemp(t)

			// The key with other arguments is refused and writes nothing.
			_, err = e.callCtx(t, ctx, tools.NameFSWrite, args("path", "a.txt", "content", "other"))
			var ee *tool.ExecutionError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, tools.CodeIdempotencyConflict, ee.Problem().Code())
			require.Equal(t, tool.Definitive, ee.Outcome())
			require.Equal(t, "later", e.read(t, "a.txt"))

			// Another key, or none, is another call: it writes.
			other := idempotency.WithKey(context.Background(), idempotency.Derive("pair-1", "run-1", "call-2"))
			_, err = e.callCtx(t, other, tools.NameFSWrite, args("path", "a.txt", "content", "first"))
			require.NoError(t, err)
			require.Equal(t, "first", e.read(t, "a.txt"))
			e.write(t, "a.txt", "later")
			_, err = e.callCtx(t, context.Background(), tools.NameFSWrite, args("path", "a.txt", "content", "first"))
			require.NoError(t, err)
			require.Equal(t, "first", e.read(t, "a.txt"))
		})
	}
}

func TestR5_AJournalMustBeADirectory(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for _, j := range []string{file, filepath.Join(root, "missing")} {
		_, err := tools.New(tools.Config{Root: root, Journal: j})
		require.ErrorIs(t, err, bound.ErrInvalid, j)
	}
}
