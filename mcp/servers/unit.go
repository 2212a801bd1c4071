package servers

import (
	"context"
	"sync"

	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/mcp/client"
)

// conn is one connection, shared by the generations listed from it: it
// ends with the last of them.
type conn struct {
	srv *client.Server

	mu   sync.Mutex
	refs int
	done chan struct{}
}

// acquire takes a reference for a new generation; false once the
// connection ended.
func (c *conn) acquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refs == 0 && c.done != nil {
		return false
	}
	c.refs++
	return true
}

func (c *conn) release() {
	c.mu.Lock()
	c.refs--
	last := c.refs == 0
	if last {
		c.done = closedChan()
	}
	c.mu.Unlock()
	if last {
		_ = c.srv.Close()
	}
}

func (c *conn) closed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		return nil
	}
	return c.done
}

func closedChan() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

// unit is one generation: a verified tool set of one connection, counting
// its calls in flight so that it can drain.
type unit struct {
	c     *conn
	tools []tool.Tool
	infos []client.Info

	mu       sync.Mutex
	inFlight int
	idle     chan struct{} // closed when inFlight drops to zero
	stopped  bool
	once     sync.Once
}

func newUnit(c *conn, tools []tool.Tool, infos []client.Info) *unit {
	u := &unit{c: c, infos: infos}
	for _, t := range tools {
		u.tools = append(u.tools, &counted{u: u, t: t})
	}
	return u
}

func (u *unit) Tools() []tool.Tool { return u.tools }

func (u *unit) InFlight() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.inFlight
}

func (u *unit) Idle(ctx context.Context) error {
	u.mu.Lock()
	if u.inFlight == 0 {
		u.mu.Unlock()
		return nil
	}
	ch := u.idle
	u.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the generation: new calls are refused, and the connection
// ends if no other generation uses it.
func (u *unit) Close() error {
	u.mu.Lock()
	u.stopped = true
	u.mu.Unlock()
	u.once.Do(u.c.release)
	return nil
}

// Kill is Close: a call still in flight ends with the connection, which
// is closed once its last generation is.
func (u *unit) Kill() { _ = u.Close() }

func (u *unit) begin() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.stopped {
		return false
	}
	if u.inFlight == 0 {
		u.idle = make(chan struct{})
	}
	u.inFlight++
	return true
}

func (u *unit) end() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.inFlight--
	if u.inFlight == 0 {
		close(u.idle)
	}
}

// counted is a tool of a generation.
type counted struct {
	u *unit
	t tool.Tool
}

func (c *counted) Definition() tool.Definition { return c.t.Definition() }

func (c *counted) Execute(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
	if !c.u.begin() {
		return tool.Result{}, tool.Fail(call.ID(), problemSuperseded)
	}
	defer c.u.end()
	return c.t.Execute(ctx, call, r)
}
