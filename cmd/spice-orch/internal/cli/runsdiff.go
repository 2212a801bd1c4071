package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/pairdiff"
	"github.com/spice-orch/spice-orch/store"
)

// errDiffer is the exit of `runs diff` when the timelines differ: exit 1,
// with the report already printed.
var errDiffer = &exitError{code: ExitFailed}

func newDiffCmd(env Env, f *runsFlags) *cobra.Command {
	var exact bool
	var context int
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare two recorded pairs event by event",
		Long: `Compare the timelines of two recorded pairs, event by event, and print the
first divergence: the events before it, both sides' events at it with the
fields that differ (kind, worker, payload fields), and the events after it
on each side. Times and IDs are not compared unless --exact.

A and B are pair IDs in the store, or files of JSON lines as 'run --json'
and 'runs replay --json' print them.

Exit codes: 0 the timelines match, 1 they differ, 2 bad usage (a pair or
file that cannot be read, a malformed line).`,
		Example: `  spice-orch runs diff pair-20261203-125230-d9809513 pair-20261203-125301-5be2a1f0
  spice-orch runs diff a.jsonl b.jsonl --exact`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: f.completeIDs(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			if context < 0 || context > pairdiff.MaxContext {
				return usageErr(fmt.Errorf("--context must be between 0 and %d", pairdiff.MaxContext))
			}
			var st *store.Store
			defer func() {
				if st != nil {
					st.Close()
				}
			}()
			var tls [2]pairdiff.Timeline
			for i, name := range [2]string{"A", "B"} {
				b, err := f.timeline(cmd.Context(), env, &st, args[i])
				if err != nil {
					return usageErr(err)
				}
				if tls[i], err = pairdiff.Parse(name, bytes.NewReader(b)); err != nil {
					return usageErr(fmt.Errorf("%s: %w", render.Field(args[i]), err))
				}
			}
			o := pairdiff.Options{Exact: exact, Context: context}
			if context == 0 {
				o.Context = -1
			}
			d := pairdiff.Compare(tls[0], tls[1], o)
			if d == nil {
				fmt.Fprintf(env.Stdout, "the timelines match (%d events)\n", len(tls[0]))
				return nil
			}
			if err := d.Report(env.Stdout); err != nil {
				return failed(err)
			}
			return errDiffer
		},
	}
	cmd.Flags().BoolVar(&exact, "exact", false, "compare times and IDs too")
	cmd.Flags().IntVar(&context, "context", pairdiff.DefaultContext, "events of context on each side of the divergence")
	return cmd
}

// timeline reads one side of a diff: the file at arg when there is one,
// else the recorded pair arg, opening the store on first use.
func (f *runsFlags) timeline(ctx context.Context, env Env, st **store.Store, arg string) ([]byte, error) {
	if fi, err := os.Stat(arg); err == nil && fi.Mode().IsRegular() {
		if fi.Size() > maxDiffInput {
			return nil, fmt.Errorf("%s: larger than %d bytes", render.Field(arg), maxDiffInput)
		}
		file, err := os.Open(arg)
		if err != nil {
			return nil, err
		}
		defer file.Close()
		return io.ReadAll(io.LimitReader(file, maxDiffInput))
	}
	if *st == nil {
		s, _, ok, err := f.open(ctx, env)
		if err != nil {
			return nil, errors.Unwrap(err)
		}
		if !ok {
			return nil, fmt.Errorf("%s: not found (nothing recorded yet)", render.Field(arg))
		}
		*st = s
	}
	if _, err := (*st).Pair(ctx, arg); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%s: no such file or recorded pair", render.Field(arg))
		}
		return nil, err
	}
	var buf bytes.Buffer
	if err := (*st).ReplayJSON(ctx, &buf, arg); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// maxDiffInput bounds a timeline file `runs diff` reads.
const maxDiffInput = 1 << 30
