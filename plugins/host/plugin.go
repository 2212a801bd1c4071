package host

import (
	"context"
	"slices"
	"time"

	"github.com/spice-orch/spice-orch/kernel/tool"
	pb "github.com/spice-orch/spice-orch/plugins/pluginpb/v1"
)

// Manifest returns the verified manifest.
func (p *Plugin) Manifest() Manifest {
	m := p.manifest
	m.Tools = slices.Clone(m.Tools)
	return m
}

// Tools returns the plugin's tools, in manifest order, as kernel tools.
func (p *Plugin) Tools() []tool.Tool {
	out := make([]tool.Tool, len(p.tools))
	for i, t := range p.tools {
		out[i] = t
	}
	return out
}

// PID returns the process ID of the plugin, which is also its process
// group ID.
func (p *Plugin) PID() int { return p.pgid }

// Stderr returns the bounded tail of the plugin's stderr.
func (p *Plugin) Stderr() []string { return p.stderr.snapshot() }

// Exited is closed once the plugin process has ended.
func (p *Plugin) Exited() <-chan struct{} { return p.exited }

// Close stops the plugin: new calls are refused, the plugin is asked to
// shut down within ShutdownGrace, then its whole process group is killed.
// A call still in flight when the group is killed ends as CodeStopped,
// uncertain if it mutates. Close is idempotent and returns within about
// twice ShutdownGrace.
func (p *Plugin) Close() error {
	p.closeOnce.Do(func() {
		close(p.closing)
		grace := p.cfg.ShutdownGrace
		deadline := time.Now().Add(grace)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		_, _ = p.client.Shutdown(ctx, &pb.ShutdownRequest{GraceMillis: uint64(grace / time.Millisecond)})
		cancel()
		p.stdin.Close()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-p.exited:
		case <-t.C:
		}
		t.Stop()
		// Calls still in flight now end as stopped by force.
		p.force()
		p.stop(0)
	})
	return nil
}
