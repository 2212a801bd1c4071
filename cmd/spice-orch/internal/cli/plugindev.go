package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/plugins/devloop"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/server"
)

type devFlags struct {
	out      string
	debounce time.Duration
	cases    []string
	run      string
	index    int
	noStore  bool
	// launcher, files and lock make DIR a Python plugin's folder.
	launcher string
	files    []string
	lock     string
	// serve and store run a loopback serve whose new pairs use the
	// active build.
	serve string
	store string
}

func newPluginDevCmd(env Env) *cobra.Command {
	var f devFlags
	cmd := &cobra.Command{
		Use:   "dev DIR",
		Short: "Rebuild, verify and activate a Go or Python plugin each time its source is saved",
		Long: `dev is the plugin developer loop. It watches DIR, the main package of a
Go plugin, and after each burst of saves (--debounce) builds it with a fixed
environment (-trimpath, no build ID, no VCS stamp, CGO_ENABLED=0, no
network, read-only go.mod) into --out/<sha256>/, so one source always gives
one digest. It then verifies the build as a pair would launch it, runs the
conformance suite's protocol cases against it and activates it as the next
generation of the plugin.

With --launcher, DIR holds a Python plugin's files: its packages and its
hash-locked requirements file (--lock), which a virtual environment was
made from, and whose interpreter the launcher's #! line names. A build
copies the launcher and the --file entries into --out/<pin>/ (exe and
root/), the pin covering all of them (as 'plugin pin --root --file'),
checks that every requirement of the lock carries a --hash, and compiles
every .py file with the launcher's interpreter: a syntax error is a
FILE:LINE diagnostic.

A candidate that fails to build, verify or pass conformance leaves the last
good generation active: dev prints the failed candidate, the active
generation and diagnostics as FILE:LINE: message. With --run SPEC, each
activation pins the build into plugins[--index] of SPEC (as 'plugin pin'
does) and plays the spec against it; a Python plugin's entry needs
root: and files:, and root is rewritten too. With --serve ADDR (loopback
only, no token) a 'serve' runs beside the loop: every pair started there
launches the active build as a plugin beside its compiled tools, pairs
already running keep the build they started with, and the page shows the
active generation and why the last candidate failed. Ctrl-C stops the
loop; the active generation drains.`,
		Example: `  spice-orch plugin dev ./plugins/examples/wordcount
  spice-orch plugin dev --run examples/plugin-pair.yaml ./plugins/examples/wordcount
  spice-orch plugin dev --serve 127.0.0.1:7070 ./plugins/examples/wordcount
  spice-orch plugin dev --launcher "$PWD/.venv-plugins/bin/spice-plugin-fixture-python" \
      --file spice_fixture --file gen --file requirements.txt ./plugins/fixtures/python`,
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
	fl.StringVar(&f.launcher, "launcher", "", "a Python plugin's launcher (absolute path): DIR then holds the files it loads")
	fl.StringSliceVar(&f.files, "file", nil, "with --launcher: a file or folder under DIR that the plugin loads (repeatable; default: the .py files and the folders holding .py files at DIR's top, and --lock)")
	fl.StringVar(&f.lock, "lock", devloop.DefaultLock, "with --launcher: the hash-locked requirements file under DIR")
	fl.StringVar(&f.serve, "serve", "", "run 'serve' on this loopback address; its new pairs use the active build")
	fl.StringVar(&f.store, "store", "", "with --serve: the store to record into (default as for 'serve')")
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
	if f.serve != "" {
		// The pairs of this serve run a build of the working tree: no
		// token, so loopback only.
		if err := server.CheckListen(f.serve, false); err != nil {
			return usageErr(fmt.Errorf("--serve: %w", err))
		}
	}
	cfg := devloop.Config{Dir: dir, Out: out, Debounce: f.debounce, Cases: f.cases,
		PlanPrefix: "dev-" + filepath.Base(dir)}
	if f.launcher != "" {
		if cfg.Python, err = pythonPlugin(dir, f); err != nil {
			return usageErr(err)
		}
	} else {
		if len(f.files) > 0 {
			return usageErr(errors.New("--file needs --launcher: a Go plugin's build covers its module"))
		}
		goCmd, err := exec.LookPath("go")
		if err == nil {
			goCmd, err = filepath.Abs(goCmd)
		}
		if err != nil {
			return failed(fmt.Errorf("the go command: %w", err))
		}
		cfg.Go = goCmd
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	state := &devState{plugin: filepath.Base(dir)}
	cfg.OnReport = func(r devloop.Report) {
		state.report(r)
		fmt.Fprintln(env.Stdout, r.String())
		if r.Kind != devloop.Activated || f.run == "" {
			return
		}
		if err := rewritePin(f.run, f.index, r.Path, r.SHA256, r.Root); err != nil {
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
	served := make(chan error, 1)
	if f.serve == "" {
		served <- nil
	} else {
		sf := serveFlags{addr: f.serve, store: f.store, pairs: scheduler.DefaultPairs, queue: 256, maxConns: 1024,
			pace: 150 * time.Millisecond, approve: "mutating", approveTimeout: orchestrator.DefaultApprovalTimeout}
		go func() {
			err := runServe(ctx, env, sf, serveHooks{plugin: state.active, pluginDev: state})
			cancel() // a serve that ended ends the loop
			served <- err
		}()
	}
	fmt.Fprintf(env.Stdout, "watching %s; builds in %s (Ctrl-C stops)\n", dir, out)
	err = l.Run(ctx)
	cancel()
	if serr := <-served; serr != nil {
		return serr
	}
	if err != nil {
		return failed(err)
	}
	return nil
}

// pythonPlugin is the Python plugin of --launcher: the --file entries, or
// by default the .py files and the folders holding .py files at the top
// of dir.
func pythonPlugin(dir string, f devFlags) (*devloop.Python, error) {
	launcher, err := filepath.Abs(f.launcher)
	if err != nil {
		return nil, err
	}
	files := f.files
	if len(files) == 0 {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			n := e.Name()
			if strings.HasPrefix(n, ".") || n == "__pycache__" {
				continue
			}
			if e.Type().IsRegular() && strings.HasSuffix(n, ".py") || e.IsDir() && holdsPython(filepath.Join(dir, n)) {
				files = append(files, n)
			}
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s holds no .py file: name the plugin's files with --file", dir)
		}
	}
	return &devloop.Python{Launcher: launcher, Files: files, Lock: f.lock}, nil
}

// holdsPython reports whether dir holds a .py file, leaving out hidden
// folders and virtual environments.
func holdsPython(dir string) bool {
	found := errors.New("found")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && p != dir && strings.HasPrefix(d.Name(), "."):
			return filepath.SkipDir
		case d.IsDir():
			if _, err := os.Stat(filepath.Join(p, "pyvenv.cfg")); err == nil {
				return filepath.SkipDir
			}
		case strings.HasSuffix(d.Name(), ".py"):
			return found
		}
		return nil
	})
	return err == found
}

// devState is what the loop last reported, for serve's page
// (server.PluginDev) and its new pairs.
type devState struct {
	plugin string

	mu     sync.Mutex
	state  server.PluginDevState
	pinned spec.Plugin // the active build; Path "" before the first
}

var _ server.PluginDev = (*devState)(nil)

func (d *devState) report(r devloop.Report) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.state.Plugin, d.state.Active = d.plugin, r.Active
	switch r.Kind {
	case devloop.Building:
		d.state.Building = r.Candidate
	case devloop.Activated:
		d.state.Building, d.state.Failed, d.state.ActiveSHA256 = "", nil, r.SHA256
		d.pinned = spec.Plugin{Path: r.Path, SHA256: r.SHA256, Root: r.Root, Files: slices.Clone(r.Files)}
	case devloop.Failed:
		f := &server.PluginDevFailure{Candidate: r.Candidate, Stage: string(r.Stage)}
		for _, dg := range r.Diagnostics {
			f.Diagnostics = append(f.Diagnostics, dg.String())
		}
		d.state.Building, d.state.Failed = "", f
	case devloop.Unchanged:
		// The source is the active build's again: no candidate failed.
		d.state.Building, d.state.Failed = "", nil
	case devloop.Discarded:
		d.state.Building = ""
	}
}

// PluginDevState implements server.PluginDev.
func (d *devState) PluginDevState() server.PluginDevState {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.state
	st.Plugin = d.plugin
	if st.Failed != nil {
		f := *st.Failed
		f.Diagnostics = slices.Clone(f.Diagnostics)
		st.Failed = &f
	}
	return st
}

// active is the active build as a spec's plugin entry.
func (d *devState) active() (spec.Plugin, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pinned
	p.Files = slices.Clone(p.Files)
	return p, p.Path != ""
}
