package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/compose"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
)

func newValidateCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a pair spec file without running it",
		Long: `Check a pair spec (YAML or JSON) the way 'run' reads it, without running
anything, reading the environment or touching the network: unknown fields,
wrong types and out-of-range values are reported with their line, and a
scripted worker must call only tools the plan has (` + strings.Join(compose.ToolNames(), ", ") + `).

Exit codes: 0 valid, 2 invalid.`,
		Example: `  spice-orch validate examples/review-pair.yaml
  spice-orch validate my-pair.json`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"yaml", "yml", "json"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := loadSpec(args)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(env.Stdout, "%s: valid: pattern %s, %s and %s\n", args[0], s.Pattern,
				describeWorker(s.Workers[0]), describeWorker(s.Workers[1]))
			return err
		},
	}
}

func describeWorker(w spec.Worker) string {
	s := w.Role + " (" + string(w.Provider)
	switch {
	case w.Provider == spec.OpenAI:
		s += " " + w.Model
	case w.Builtin:
		s += ", built-in script"
	default:
		s += ", " + fmt.Sprint(len(w.Script.Steps)) + " steps"
	}
	return s + ")"
}
