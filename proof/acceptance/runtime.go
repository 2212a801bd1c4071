package acceptance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/plugins/host"
)

// RuntimeReport is what the runtime-tool part left behind in one play.
type RuntimeReport struct {
	// Digests are the SHA-256 of each generation's executable, as the
	// host verified and ran it.
	Digests []string
	// Timeline is the generation/lease timeline of the pair's plan
	// source: the host's generation events and the pair's leases and
	// releases, in order, then the check that every process is gone.
	Timeline []string
	// PIDs are the plugin processes the play started.
	PIDs []int
	// Err is a failure to stop them: Close's error, or a PID still alive.
	Err error
}

// maxTimeline bounds the entries a RuntimeReport keeps.
const maxTimeline = 256

// runtimeSource is the pair's plan source when the runtime-tool part is
// on: the plugin host's Source over the compiled tools and one generation
// per plugin, recording its generation/lease timeline.
type runtimeSource struct {
	src *host.Source

	mu  sync.Mutex
	rep RuntimeReport
}

var _ plan.Source = (*runtimeSource)(nil)

func newRuntimeSource(ctx context.Context, prefix string, compiled []tool.Tool, rt *RuntimeToolPart) (*runtimeSource, error) {
	rs := &runtimeSource{}
	src, err := host.NewSource(ctx, host.SourceConfig{
		PlanPrefix: prefix, Compiled: compiled, Plugins: rt.Plugins,
		MaxRestarts: 1,
		OnEvent: func(e host.Event) {
			s := string(e.Kind)
			if e.Plan != "" {
				s += " " + string(e.Plan)
			}
			if e.Generation != "" {
				s += " " + e.Generation
			}
			rs.record(s)
		},
	})
	if err != nil {
		return nil, wrap(PartRuntime, fmt.Errorf("starting the plugin host: %w", err))
	}
	rs.src = src
	for _, g := range src.Generations() {
		rs.rep.Digests = append(rs.rep.Digests, g.Digest)
		rs.rep.PIDs = append(rs.rep.PIDs, g.PID)
	}
	return rs, nil
}

func (rs *runtimeSource) record(s string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.rep.Timeline) < maxTimeline {
		rs.rep.Timeline = append(rs.rep.Timeline, s)
	}
}

// generations names the generations plan id holds.
func (rs *runtimeSource) generations(id plan.ID) string {
	gp, ok := rs.src.Plan(id)
	if !ok {
		return ""
	}
	names := make([]string, len(gp.Generations))
	for i, g := range gp.Generations {
		names[i] = g.ID
	}
	return strings.Join(names, ",")
}

// wrapLease records l and its release.
func (rs *runtimeSource) wrapLease(l *plan.Lease, how string) (*plan.Lease, error) {
	id := l.Plan().ID()
	rs.record(how + " " + string(id) + " [" + rs.generations(id) + "]")
	return plan.NewLease(l.Plan(), func() error {
		rs.record("release " + string(id))
		return l.Release(context.Background())
	}, plan.LeaseConfig{Inline: true})
}

func (rs *runtimeSource) Lease(ctx context.Context) (*plan.Lease, error) {
	l, err := rs.src.Lease(ctx)
	if err != nil {
		return nil, err
	}
	return rs.wrapLease(l, "lease")
}

func (rs *runtimeSource) LeaseExact(ctx context.Context, id plan.ID) (*plan.Lease, error) {
	l, err := rs.src.LeaseExact(ctx, id)
	if err != nil {
		return nil, err
	}
	return rs.wrapLease(l, "lease exact")
}

// close stops the plugin host and checks that every process it started
// is gone, by PID.
func (rs *runtimeSource) close() RuntimeReport {
	closeErr := rs.src.Close()
	for _, g := range rs.src.Generations() {
		rs.rep.PIDs = appendNew(rs.rep.PIDs, g.PID)
	}
	line, err := checkStopped(closeErr, rs.rep.PIDs, alive)
	rs.record(line)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rep := rs.rep
	rep.Timeline = append([]string(nil), rs.rep.Timeline...)
	rep.Err = err
	return rep
}

// checkStopped is the runtime part's last check: closing the host
// succeeded and none of pids is alive. It returns the timeline's last
// line and the failure, naming every problem.
func checkStopped(closeErr error, pids []int, alive func(int) bool) (string, error) {
	var errs []error
	if closeErr != nil {
		errs = append(errs, fmt.Errorf("closing the plugin host: %w", closeErr))
	}
	gone := 0
	for _, pid := range pids {
		if alive(pid) {
			errs = append(errs, fmt.Errorf("plugin process %d is still running after the host stopped", pid))
			continue
		}
		gone++
	}
	line := fmt.Sprintf("host closed: %d of %d plugin processes gone by PID", gone, len(pids))
	if closeErr != nil {
		line = fmt.Sprintf("host closed with an error: %d of %d plugin processes gone by PID", gone, len(pids))
	}
	return line, wrap(PartRuntime, errors.Join(errs...))
}

func appendNew(s []int, v int) []int {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
