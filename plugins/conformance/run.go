package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/metadata"

	pluginv1 "github.com/spice-orch/spice-orch/plugins/pluginpb/v1"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Config is the input to Run.
type Config struct {
	Launcher Launcher
	// Only names the cases to run, in the suite's order; empty runs all.
	Only []string
	// CaseTimeout bounds one case; 0 means 30s.
	CaseTimeout time.Duration
	// CancelBound is how long a cancelled call may keep running; 0 means 2s.
	CancelBound time.Duration
	// ExitBound is how long the plugin may take to exit after Shutdown or
	// the end of stdin; 0 means 5s.
	ExitBound time.Duration
}

// Result is the verdict of one case.
type Result struct {
	Case    string
	Passed  bool
	Detail  string // why it failed; empty when it passed
	Err     error  // what Detail says, for errors.Is (ErrProof, ...)
	Elapsed time.Duration
}

// ErrUnknownCase is returned by Run for a name in Config.Only that is not
// a case.
var ErrUnknownCase = errors.New("conformance: unknown case")

// Run launches the plugin through cfg.Launcher and runs the cases. Most
// cases share one launch; the protocol and stdin cases launch their own.
// Every process started is stopped before Run returns. The error is only
// for a bad Config; a plugin's failures are in the results.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if cfg.Launcher == nil {
		return nil, errors.New("conformance: Config.Launcher is nil")
	}
	for _, n := range cfg.Only {
		if !slices.ContainsFunc(cases, func(c Case) bool { return c.Name == n }) {
			return nil, fmt.Errorf("%w: %q", ErrUnknownCase, n)
		}
	}
	s := &session{cfg: cfg}
	s.cfg.CaseTimeout = cmpDur(cfg.CaseTimeout, 30*time.Second)
	s.cfg.CancelBound = cmpDur(cfg.CancelBound, 2*time.Second)
	s.cfg.ExitBound = cmpDur(cfg.ExitBound, 5*time.Second)
	defer s.close()
	var out []Result
	for _, c := range cases {
		if len(cfg.Only) > 0 && !slices.Contains(cfg.Only, c.Name) {
			continue
		}
		out = append(out, s.run(ctx, c))
	}
	return out, nil
}

// Passed reports whether every result passed (and there is at least one).
func Passed(rs []Result) bool {
	return len(rs) > 0 && !slices.ContainsFunc(rs, func(r Result) bool { return !r.Passed })
}

// WriteTable prints the results as an aligned table with a closing count
// line ("N passed, N failed").
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tRESULT\tTIME\tDETAIL")
	failed := 0
	for _, r := range rs {
		verdict := "pass"
		if !r.Passed {
			verdict = "FAIL"
			failed++
		}
		detail := strings.ReplaceAll(r.Detail, "\n", " ")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Case, verdict, r.Elapsed.Round(time.Millisecond), detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "conformance: %d passed, %d failed\n", len(rs)-failed, failed)
	return err
}

// session is the state cases share: one launch and its manifest.
type session struct {
	cfg       Config
	target    Target
	launchErr error
	manifest  *pluginv1.Manifest
	defs      map[string]tool.Definition
	calls     int
}

func (s *session) run(ctx context.Context, c Case) (r Result) {
	r.Case = c.Name
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CaseTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			r.Passed, r.Err = false, fmt.Errorf("the case panicked: %v", p)
			r.Detail = r.Err.Error()
		}
		r.Elapsed = time.Since(start)
	}()
	if err := c.run(ctx, s); err != nil {
		r.Err, r.Detail = err, err.Error()
		return r
	}
	r.Passed = true
	return r
}

func (s *session) close() {
	if s.target != nil {
		s.target.Close()
	}
}

// shared returns the launch most cases use, launching it on first use.
func (s *session) shared(ctx context.Context) (Target, error) {
	if s.target == nil && s.launchErr == nil {
		s.target, s.launchErr = s.cfg.Launcher.Launch(ctx, LaunchConfig{})
		if s.launchErr != nil {
			s.launchErr = &launchError{s.launchErr}
		}
	}
	return s.target, s.launchErr
}

// launchError is a case's failure to launch the plugin at all: a verdict
// on its start, not on the rule the case is about.
type launchError struct{ err error }

func (e *launchError) Error() string { return "launch: " + e.err.Error() }
func (e *launchError) Unwrap() error { return e.err }

// tools returns the shared launch's manifest, as kernel definitions.
func (s *session) tools(ctx context.Context) (Target, map[string]tool.Definition, error) {
	t, err := s.shared(ctx)
	if err != nil {
		return nil, nil, err
	}
	if s.defs == nil {
		m, err := describe(ctx, t, 1)
		if err != nil {
			return nil, nil, fmt.Errorf("describe: %w", err)
		}
		defs := make(map[string]tool.Definition, len(m.GetTools()))
		for _, d := range m.GetTools() {
			def, err := definition(d)
			if err != nil {
				return nil, nil, fmt.Errorf("manifest tool %q: %w", d.GetName(), err)
			}
			if _, dup := defs[def.Name()]; dup {
				return nil, nil, fmt.Errorf("manifest: tool %q twice", def.Name())
			}
			defs[def.Name()] = def
		}
		s.manifest, s.defs = m, defs
	}
	return t, s.defs, nil
}

func authed(ctx context.Context, t Target) context.Context {
	return metadata.AppendToOutgoingContext(ctx, AuthMetadata, t.AuthToken())
}

func client(t Target) pluginv1.PluginServiceClient { return pluginv1.NewPluginServiceClient(t.Conn()) }

func describe(ctx context.Context, t Target, versions ...uint32) (*pluginv1.Manifest, error) {
	resp, err := client(t).Describe(authed(ctx, t), &pluginv1.DescribeRequest{HostProtocolVersions: versions})
	if err != nil {
		return nil, err
	}
	if resp.GetManifest() == nil {
		return nil, errors.New("no manifest")
	}
	return resp.GetManifest(), nil
}

// cmpDur returns d, or def when d is not positive.
func cmpDur(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// maxCallMessage bounds what the suite's connection sends and receives.
const maxCallMessage = 16 << 20

// maxStream bounds the messages the suite reads from one Execute stream.
const maxStream = MaxProgress + 16

// call is one Execute as the suite saw it.
type call struct {
	id       string
	progress []string
	outcome  *pluginv1.Outcome
}

// execute runs one call to the end of its stream and checks the stream's
// shape: progress for this call, exactly one outcome, nothing after it.
func (s *session) execute(ctx context.Context, t Target, toolName, args string) (*call, error) {
	s.calls++
	c := &call{id: fmt.Sprintf("conformance-%d", s.calls)}
	stream, err := client(t).Execute(authed(ctx, t), &pluginv1.ExecuteRequest{
		CallId: c.id, ToolName: toolName, ArgumentsJson: []byte(args), TimeoutMillis: uint64(s.cfg.CaseTimeout.Milliseconds()),
	})
	if err != nil {
		return nil, err
	}
	return c, readStream(stream, c)
}

func readStream(stream pluginv1.PluginService_ExecuteClient, c *call) error {
	for range maxStream {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if c.outcome == nil {
				return errors.New("the stream ended without an outcome")
			}
			return nil
		}
		if err != nil {
			return err
		}
		if c.outcome != nil {
			return errors.New("a message after the outcome")
		}
		switch {
		case msg.GetProgress() != nil:
			if got := msg.GetProgress().GetCallId(); got != c.id {
				return fmt.Errorf("progress for call %q, want %q", got, c.id)
			}
			if _, err := tool.NewProgress(id.Call(c.id), msg.GetProgress().GetMessage()); err != nil {
				return fmt.Errorf("progress the kernel refuses: %w", err)
			}
			c.progress = append(c.progress, msg.GetProgress().GetMessage())
			if len(c.progress) > MaxProgress {
				return fmt.Errorf("more than %d progress messages in one call", MaxProgress)
			}
		case msg.GetOutcome() != nil:
			if got := msg.GetOutcome().GetCallId(); got != c.id {
				return fmt.Errorf("an outcome for call %q, want %q", got, c.id)
			}
			c.outcome = msg.GetOutcome()
		default:
			return errors.New("a message with neither progress nor an outcome")
		}
	}
	return fmt.Errorf("more than %d messages on one stream", maxStream)
}
