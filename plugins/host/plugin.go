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
		p.mu.Lock()
		close(p.closing)
		p.mu.Unlock()
		// Before the plugin is asked to exit: its descendants are found
		// through it.
		p.seeTree()
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

// Kill stops the plugin by force at once: calls in flight end as
// CodeStopped (uncertain if they mutate), then the whole process group is
// killed. A later Close does nothing.
func (p *Plugin) Kill() {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		close(p.closing)
		p.mu.Unlock()
		p.force()
		p.stop(0)
	})
}

// InFlight returns the number of calls in flight.
func (p *Plugin) InFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight
}

// Idle waits until no call is in flight or ctx ends.
func (p *Plugin) Idle(ctx context.Context) error {
	p.mu.Lock()
	if p.inflight == 0 {
		p.mu.Unlock()
		return nil
	}
	if p.idle == nil {
		p.idle = make(chan struct{})
	}
	idle := p.idle
	p.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// beginCall counts a call in, unless the plugin is closing or gone.
func (p *Plugin) beginCall() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closing:
		return false
	case <-p.exited:
		return false
	default:
	}
	p.inflight++
	return true
}

func (p *Plugin) endCall() {
	p.mu.Lock()
	p.inflight--
	if p.inflight == 0 && p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
	p.mu.Unlock()
}
