package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/plugins/devloop"
)

type devFlags struct {
	out      string
	debounce time.Duration
	cases    []string
	run      string
	index    int
	noStore  bool
}

func newPluginDevCmd(env Env) *cobra.Command {
	var f devFlags
	cmd := &cobra.Command{
		Use:   "dev DIR",
		Short: "Rebuild, verify and activate a Go plugin each time its source is saved",
		Long: `dev is the plugin developer loop. It watches DIR, the main package of a
Go plugin, and after each burst of saves (--debounce) builds it with a fixed
environment (-trimpath, no build ID, no VCS stamp, CGO_ENABLED=0, no
network, read-only go.mod) into --out/<sha256>/, so one source always gives
one digest. It then verifies the build as a pair would launch it, runs the
conformance suite's protocol cases against it and activates it as the next
generation of the plugin.

A candidate that fails to build, verify or pass conformance leaves the last
good generation active: dev prints the failed candidate, the active
generation and diagnostics as FILE:LINE: message. With --run SPEC, each
activation pins the build into plugins[--index] of SPEC (as 'plugin pin'
does) and plays the spec against it. Ctrl-C stops the loop; the active
generation drains.`,
		Example: `  spice-orch plugin dev ./plugins/examples/wordcount
  spice-orch plugin dev --run examples/plugin-pair.yaml ./plugins/examples/wordcount`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return pluginDev(cmd, env, f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "the folder of the content-addressed builds (default $XDG_CACHE_HOME/spice-orch/plugin-builds)")
	fl.DurationVar(&f.debounce, "debounce", devloop.DefaultDebounce, "how long the source must stay unchanged before a build starts")
	fl.StringSliceVar(&f.cases, "case", nil, "a conformance case each build must pass (repeatable; default: the protocol cases)")
	fl.StringVar(&f.run, "run", "", "a pair spec to pin each activated build into and play")
	fl.IntVar(&f.index, "index", 0, "with --run: the plugin's index in the spec's plugins list")
	fl.BoolVar(&f.noStore, "no-store", false, "with --run: record nothing")
	return cmd
}

func pluginDev(cmd *cobra.Command, env Env, f devFlags, arg string) error {
	dir, err := filepath.Abs(arg)
	if err != nil {
		return usageErr(err)
	}
	if f.out == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return usageErr(fmt.Errorf("--out: %w", err))
		}
		f.out = filepath.Join(cache, "spice-orch", "plugin-builds")
	}
	out, err := filepath.Abs(f.out)
	if err != nil {
		return usageErr(err)
	}
	if f.run != "" {
		s, err := spec.DecodeFile(f.run)
		if err != nil {
			return usageErr(err)
		}
		if f.index < 0 || f.index >= len(s.Plugins) {
			return usageErr(fmt.Errorf("--index: %s lists %d plugins; there is no plugins[%d]", f.run, len(s.Plugins), f.index))
		}
	}
	goCmd, err := exec.LookPath("go")
	if err == nil {
		goCmd, err = filepath.Abs(goCmd)
	}
	if err != nil {
		return failed(fmt.Errorf("the go command: %w", err))
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := devloop.Config{Go: goCmd, Dir: dir, Out: out, Debounce: f.debounce, Cases: f.cases,
		PlanPrefix: "dev-" + filepath.Base(dir)}
	cfg.OnReport = func(r devloop.Report) {
		fmt.Fprintln(env.Stdout, r.String())
		if r.Kind != devloop.Activated || f.run == "" {
			return
		}
		if err := rewritePin(f.run, f.index, r.Path, r.SHA256); err != nil {
			fmt.Fprintf(env.Stdout, "--run: %v\n", err)
			return
		}
		fmt.Fprintf(env.Stdout, "%s: plugins[%d] pinned to sha256 %s; playing it\n", f.run, f.index, r.SHA256)
		rf := runFlags{noStore: f.noStore, approveTimeout: orchestrator.DefaultApprovalTimeout}
		if err := runPair(ctx, env, rf, []string{f.run}); err != nil {
			var ee *exitError
			if errors.As(err, &ee) && ee.err == nil {
				err = fmt.Errorf("exit %d", ee.code)
			}
			fmt.Fprintf(env.Stdout, "--run: the pair ended: %v\n", err)
		}
	}
	l, err := devloop.New(ctx, cfg)
	if err != nil {
		return usageErr(err)
	}
	fmt.Fprintf(env.Stdout, "watching %s; builds in %s (Ctrl-C stops)\n", dir, out)
	if err := l.Run(ctx); err != nil {
		return failed(err)
	}
	return nil
}
