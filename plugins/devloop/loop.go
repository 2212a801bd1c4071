package devloop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/plugins/conformance"
	"github.com/spice-orch/spice-orch/plugins/host"
)

// Defaults of Config.
const (
	DefaultDebounce     = 200 * time.Millisecond
	DefaultBuildTimeout = 10 * time.Minute
	DefaultPlanPrefix   = "dev"
	maxStderrLines      = 10
)

// ProtocolCases are the conformance cases every plugin must pass whatever
// its tools: the rest of the suite calls the fixtures' tool profile.
var ProtocolCases = []string{
	"handshake/proof", "auth/missing", "auth/wrong",
	"protocol/old", "protocol/new", "protocol/describe",
	"shutdown/stdin-eof", "shutdown/rpc",
}

var errTooLarge = errors.New("devloop: the source tree is over its bound")

// Config configures a Loop.
type Config struct {
	// Go is the absolute path of the go command, which builds a Go
	// plugin.
	Go string
	// Python, when set, makes the plugin a Python plugin: its launcher
	// and the files under Dir its pin covers. Go is then not used.
	Python *Python
	// Dir is the absolute folder of the plugin's main package, or of a
	// Python plugin's files.
	Dir string
	// Out is the absolute folder of the content-addressed builds:
	// Out/<sha256>/<base name of Dir> of a Go plugin, Out/<pin>/exe and
	// Out/<pin>/root/ of a Python plugin. It may be inside Dir; it is not
	// watched.
	Out string
	// Debounce is how long the source must stay unchanged before a
	// build starts; 0 means DefaultDebounce.
	Debounce time.Duration
	// After is the debounce timer; nil means time.After.
	After func(time.Duration) <-chan time.Time
	// BuildTimeout bounds one build; 0 means DefaultBuildTimeout.
	BuildTimeout time.Duration
	// Cases are the conformance cases a candidate must pass; nil means
	// ProtocolCases.
	Cases []string
	// Plugin is the template of every generation's host.Config (its
	// bounds and Env); Path, SHA256, Root and Files are each build's.
	Plugin host.Config
	// PlanPrefix and Compiled configure the host.Source: plans are
	// PlanPrefix-1, -2, ... of the compiled tools plus the plugin's.
	PlanPrefix string
	Compiled   []tool.Tool
	// OnReport, when set, is told of every step, from the loop's
	// goroutine: a slow OnReport delays the next build, never a run.
	OnReport func(Report)
	// OnEvent, when set, is the host.Source's OnEvent.
	OnEvent func(host.Event)
}

// ReportKind names a step of the loop.
type ReportKind string

const (
	Changed   ReportKind = "changed"   // a source file changed
	Building  ReportKind = "building"  // a candidate's build started
	Activated ReportKind = "activated" // a candidate is the active generation
	Unchanged ReportKind = "unchanged" // a candidate built the active digest again
	Discarded ReportKind = "discarded" // the source changed during the build
	Failed    ReportKind = "failed"    // a candidate failed; the active generation stays
)

// Stage names where a candidate failed.
type Stage string

const (
	StageBuild       Stage = "build"
	StageVerify      Stage = "verify"
	StageConformance Stage = "conformance"
	StageActivate    Stage = "activate"
)

// Report is one step of the loop.
type Report struct {
	Kind      ReportKind
	Candidate string // "<name>-c<N>", one per build
	File      string // Changed: the file, relative to Dir
	SHA256    string // the candidate's digest, once built
	Path      string // the candidate's executable, once built
	// Root and Files are a Python candidate's files, once built
	// (host.Config.Root and Files).
	Root  string
	Files []string
	Stage Stage // Failed
	// Active is the generation serving future leases after this step,
	// "" before the first activation.
	Active      string
	Diagnostics []Diagnostic
	Build       time.Duration // the build's share of Took
	Took        time.Duration // from the candidate's start to this report
}

// String is the report as the command line prints it.
func (r Report) String() string {
	active := r.Active
	if active == "" {
		active = "no generation"
	}
	switch r.Kind {
	case Changed:
		return "changed " + r.File
	case Building:
		return r.Candidate + ": building"
	case Activated:
		return fmt.Sprintf("%s: sha256 %s active as %s (build %s, total %s)", r.Candidate, short(r.SHA256), r.Active, round(r.Build), round(r.Took))
	case Unchanged:
		return fmt.Sprintf("%s: sha256 %s is the active build; %s stays active", r.Candidate, short(r.SHA256), active)
	case Discarded:
		return r.Candidate + ": the source changed during the build; building again"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s failed (%s); %s stays active", r.Candidate, r.Stage, active)
	for _, d := range r.Diagnostics {
		b.WriteString("\n")
		b.WriteString(d.String())
	}
	return b.String()
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// Loop is the developer loop over one plugin.
type Loop struct {
	cfg Config
	b   builder
	n   int // candidates, from the loop's goroutine only

	mu        sync.Mutex
	src       *host.Source
	active    string
	activeSum string
}

// New validates cfg and resolves the build environment.
func New(ctx context.Context, cfg Config) (*Loop, error) {
	if cfg.Debounce < 0 || cfg.BuildTimeout < 0 {
		return nil, errors.New("devloop: durations must not be negative")
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = DefaultDebounce
	}
	if cfg.BuildTimeout == 0 {
		cfg.BuildTimeout = DefaultBuildTimeout
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	if cfg.Cases == nil {
		cfg.Cases = ProtocolCases
	}
	for _, c := range cfg.Cases {
		if !slices.Contains(conformance.Names(), c) {
			return nil, fmt.Errorf("devloop: %w: %q", conformance.ErrUnknownCase, c)
		}
	}
	if cfg.PlanPrefix == "" {
		cfg.PlanPrefix = DefaultPlanPrefix
	}
	var b builder
	var err error
	if cfg.Python != nil {
		b, err = NewPythonBuilder(*cfg.Python, cfg.Dir, cfg.Out)
	} else {
		b, err = NewBuilder(ctx, cfg.Go, cfg.Dir, cfg.Out)
	}
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(cfg.Dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("devloop: %s is not a folder", cfg.Dir)
	}
	return &Loop{cfg: cfg, b: b}, nil
}

// Source is the plan source of the active generations: nil before the
// first activation.
func (l *Loop) Source() *host.Source {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.src
}

// Active returns the active generation's ID and digest.
func (l *Loop) Active() (id, sha256 string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.active, l.activeSum
}

// Run builds the source once, then again after every burst of changes,
// until ctx ends; then it closes the source (draining every generation).
func (l *Loop) Run(ctx context.Context) (err error) {
	w, err := fsnotify.NewBufferedWatcher(256)
	if err != nil {
		return err
	}
	defer w.Close()
	defer func() {
		if src := l.Source(); src != nil {
			err = errors.Join(err, src.Close())
		}
	}()
	if err := l.watchTree(w, l.cfg.Dir); err != nil {
		return err
	}
	l.attempt(ctx)
	var fire <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("devloop: the watcher stopped")
			}
			if !l.relevant(ev) {
				continue
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
					_ = l.watchTree(w, ev.Name)
				}
			}
			// Every change restarts the timer: a burst builds once.
			fire = l.cfg.After(l.cfg.Debounce)
			rel, _ := filepath.Rel(l.cfg.Dir, ev.Name)
			l.report(Report{Kind: Changed, File: rel})
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("devloop: the watcher stopped")
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// Changes were lost: build what is there now.
				fire = l.cfg.After(l.cfg.Debounce)
			}
		case <-fire:
			fire = nil
			l.attempt(ctx)
		}
	}
}

func (l *Loop) report(r Report) {
	if r.Active == "" {
		r.Active, _ = l.Active()
	}
	if l.cfg.OnReport != nil {
		l.cfg.OnReport(r)
	}
}

// attempt builds, verifies, checks and activates one candidate.
func (l *Loop) attempt(ctx context.Context) {
	start := time.Now()
	l.n++
	r := Report{Candidate: l.b.Name() + "-c" + strconv.Itoa(l.n)}
	fail := func(stage Stage, ds ...Diagnostic) {
		r.Kind, r.Stage, r.Diagnostics, r.Took = Failed, stage, ds, time.Since(start)
		l.report(r)
	}
	before, err := l.sourceDigest()
	if err != nil {
		fail(StageBuild, Diagnostic{Message: err.Error()})
		return
	}
	r.Kind = Building
	l.report(r)
	bctx, cancel := context.WithTimeout(ctx, l.cfg.BuildTimeout)
	bd, err := l.b.Build(bctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	r.Build = time.Since(start)
	if err != nil {
		var be *BuildError
		if errors.As(err, &be) {
			fail(StageBuild, be.Diagnostics...)
		} else {
			fail(StageBuild, Diagnostic{Message: err.Error()})
		}
		return
	}
	r.SHA256, r.Path, r.Root, r.Files = bd.SHA256, bd.Path, bd.Root, bd.Files
	if after, err := l.sourceDigest(); err != nil || after != before {
		r.Kind, r.Took = Discarded, time.Since(start)
		l.report(r)
		return
	}
	if _, sum := l.Active(); sum == bd.SHA256 {
		r.Kind, r.Took = Unchanged, time.Since(start)
		l.report(r)
		return
	}
	hc := hostConfig(l.cfg.Plugin, bd)
	p, err := host.Launch(ctx, hc)
	if err != nil {
		fail(StageVerify, launchDiagnostics(err)...)
		return
	}
	_ = p.Close()
	rs, err := conformance.Run(ctx, conformance.Config{
		Launcher: conformance.ProcessLauncher{Path: bd.Path, SHA256: bd.SHA256, Root: bd.Root, Files: bd.Files},
		Only:     l.cfg.Cases,
	})
	if err != nil {
		fail(StageConformance, Diagnostic{Message: err.Error()})
		return
	}
	if !conformance.Passed(rs) {
		var ds []Diagnostic
		for _, c := range rs {
			if !c.Passed {
				ds = append(ds, Diagnostic{Message: "conformance " + c.Case + ": " + c.Detail})
			}
		}
		fail(StageConformance, ds...)
		return
	}
	id, err := l.activate(ctx, hc)
	if err != nil {
		fail(StageActivate, launchDiagnostics(err)...)
		return
	}
	r.Kind, r.Active, r.Took = Activated, id, time.Since(start)
	l.report(r)
}

// activate makes hc the active generation: the source's first, or a
// Reload of its one plugin.
func (l *Loop) activate(ctx context.Context, hc host.Config) (string, error) {
	src := l.Source()
	var id string
	if src == nil {
		s, err := host.NewSource(ctx, host.SourceConfig{
			PlanPrefix: l.cfg.PlanPrefix, Compiled: l.cfg.Compiled,
			Plugins: []host.Config{hc}, OnEvent: l.cfg.OnEvent,
		})
		if err != nil {
			return "", err
		}
		src, id = s, s.Current().Generations[0].ID
	} else {
		info, err := src.Reload(ctx, 0, hc)
		if err != nil {
			return "", err
		}
		id = info.ID
	}
	l.mu.Lock()
	l.src, l.active, l.activeSum = src, id, hc.SHA256
	l.mu.Unlock()
	return id, nil
}

// launchDiagnostics are a failed launch's reason and its stderr tail.
func launchDiagnostics(err error) []Diagnostic {
	ds := []Diagnostic{{Message: err.Error()}}
	var le *host.LaunchError
	if errors.As(err, &le) {
		tail := le.Stderr
		if len(tail) > maxStderrLines {
			tail = tail[len(tail)-maxStderrLines:]
		}
		for _, s := range tail {
			ds = append(ds, Diagnostic{Message: "stderr: " + s})
		}
	}
	return ds
}
