package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/mcp/servers"
)

// Exit codes.
const (
	ExitOK        = 0
	ExitFailed    = 1
	ExitUsage     = 2
	ExitCancelled = 130
)

// Version is the release version, set at build time with
// -ldflags "-X github.com/spice-orch/spice-orch/cmd/spice-orch/internal/cli.Version=v1.2.3".
// Without it, the module version from the build info is used.
var Version = ""

// Env is what the commands use of the process.
type Env struct {
	Stdout, Stderr io.Writer
	// Stdin is where `run` reads a person's approvals, when it is a
	// terminal; nil reads nothing.
	Stdin io.Reader
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string

	// wrapStore, set by this package's tests, stands between the pair and
	// the store `run` opened (to make it refuse events).
	wrapStore func(eventlog.Observer) eventlog.Observer
	// mcpEvent, set by this package's tests, is told of every generation
	// event of a pair's MCP servers as it happens.
	mcpEvent func(servers.Event)
}

// exitError carries an exit code; err, if set, is printed to stderr.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return "exit " + fmt.Sprint(e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErr is bad usage or a bad spec: exit 2.
func usageErr(err error) error { return &exitError{code: ExitUsage, err: err} }

// failed is a failure of the command: exit 1.
func failed(err error) error { return &exitError{code: ExitFailed, err: err} }

// Main runs the command line with args (without the program name) and
// returns the exit code.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	root := newRoot(env)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(env.Stderr, "spice-orch:", render.Text(ee.err.Error()))
		}
		return ee.code
	}
	// Cobra's own errors: unknown commands, flags and argument counts.
	fmt.Fprintln(env.Stderr, "spice-orch:", render.Text(err.Error()))
	fmt.Fprintln(env.Stderr, "Run 'spice-orch --help' for usage.")
	return ExitUsage
}

func newRoot(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "spice-orch",
		Short: "Run two cooperating agents as a pair on a deterministic kernel",
		Long: `spice-orch runs two single-agent engines as a pair — a writer and a
reviewer, a planner and an executor — under one tool plan, passing each
worker's final answer to the other as an ordinary user message.

With no arguments, 'spice-orch run' runs the built-in writer/reviewer pair:
scripted models, real file tools, no network and no API key.

Exit codes: 0 completed, 1 failed, 2 bad usage or bad spec, 130 cancelled.`,
		Example: `  spice-orch run
  spice-orch run examples/review-pair.yaml --task "Write the release notes"
  OPENAI_API_KEY=sk-... spice-orch run examples/openai-pair.yaml
  spice-orch runs list
  spice-orch completion bash > /etc/bash_completion.d/spice-orch`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr(fmt.Errorf("%w\nRun '%s --help' for usage.", err, c.CommandPath()))
	})
	root.AddCommand(newRunCmd(env), newValidateCmd(env), newRunsCmd(env), newVersionCmd(env), newServeCmd(env), newWorkerCmd(env))
	root.AddCommand(newPluginCmd(env), newMCPCmd(env))
	return root
}

func newVersionCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version of spice-orch",
		Example: "  spice-orch version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(env.Stdout, "spice-orch %s (%s, %s/%s)\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}

// version is Version, else the module version and VCS revision recorded in
// the binary, else "dev".
func version() string {
	if Version != "" {
		return Version
	}
	v := "dev"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if mv := info.Main.Version; mv != "" && mv != "(devel)" {
		v = mv
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return v
}
