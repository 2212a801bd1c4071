package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/compose"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
)

func newValidateCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check pair spec files without running them",
		Long: `Check a pair spec (YAML or JSON) the way 'run' reads it, without running
anything, reading the environment or touching the network: unknown fields,
wrong types and out-of-range values are reported with their line, and a
scripted worker must call only tools the plan has (` + strings.Join(compose.ToolNames(), ", ") + `).
Files the spec names are checked as run checks them: the workspace must
stay inside the spec's folder, and a plugin's path must be an executable
regular file whose SHA-256 is its pin.

Each file is checked and reported, valid or not, on its own line.

Exit codes: 0 every file is valid, 2 one is not.`,
		Example: `  spice-orch validate examples/review-pair.yaml
  spice-orch validate my-pair.json
  spice-orch validate examples/*.yaml`,
		Args: cobra.MinimumNArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"yaml", "yml", "json"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			invalid := 0
			for _, file := range args {
				s, err := loadSpec([]string{file})
				if err != nil {
					invalid++
					fmt.Fprintln(env.Stderr, "spice-orch:", render.Text(err.Error()))
					continue
				}
				if _, err := fmt.Fprintf(env.Stdout, "%s: valid: pattern %s, %s and %s\n", render.Field(file), s.Pattern,
					describeWorker(s.Workers[0]), describeWorker(s.Workers[1])); err != nil {
					return failed(err)
				}
			}
			if invalid > 0 {
				if len(args) > 1 {
					return usageErr(fmt.Errorf("%d of %d specs are invalid", invalid, len(args)))
				}
				return &exitError{code: ExitUsage}
			}
			return nil
		},
	}
}

func describeWorker(w spec.Worker) string {
	s := w.Role + " (" + string(w.Provider)
	switch {
	case w.Provider == spec.OpenAI:
		s += " " + render.Field(w.Model)
	case w.Builtin:
		s += ", built-in script"
	default:
		s += ", " + fmt.Sprint(len(w.Script.Steps)) + " steps"
	}
	return s + ")"
}
