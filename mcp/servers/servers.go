package servers

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/mcp/client"
	"github.com/spice-orch/spice-orch/toolgen"
)

// ErrClosed: the source was closed.
var ErrClosed = errors.New("mcp source closed")

// CodeSuperseded is the problem of a call to a generation stopped by its
// drain.
const CodeSuperseded = "mcp_generation_stopped"

var problemSuperseded = problem.Must(CodeSuperseded, "the tool set of this plan was stopped")

// Config configures a Source.
type Config struct {
	// PlanPrefix names the plans: PlanPrefix-1, PlanPrefix-2, ... Required.
	PlanPrefix string
	// Compiled are the tools of every plan beside the servers'.
	Compiled []tool.Tool
	// Servers are the MCP servers, one slot each, in this order.
	Servers []client.Config
	// DrainTimeout, ShutdownTimeout and MaxRetainedPlans bound the
	// generations as toolgen.Config says; zero takes its defaults.
	DrainTimeout     time.Duration
	ShutdownTimeout  time.Duration
	MaxRetainedPlans int
	// OnEvent, when set, is told of every generation event. It must
	// return quickly.
	OnEvent func(Event)
	// Approve, when set, decides on each verified candidate whose tool
	// definitions differ from those of the generation it would replace,
	// before it is activated: an operator's approval. It may block until
	// the answer, or until ctx ends when the source closes; the active
	// generation serves meanwhile. false or an error refuses the
	// candidate (candidate.failed) and the active generation stays.
	Approve func(ctx context.Context, c Candidate) (bool, error)
}

// Candidate is a verified tool set waiting for Config.Approve.
type Candidate struct {
	Server string
	Slot   int
	Pinned bool
	// Tools are the candidate's tools; Active those of the generation it
	// would replace.
	Tools, Active []client.Info
}

// ErrNotApproved: Config.Approve refused a candidate.
var ErrNotApproved = errors.New("mcp candidate not approved")

// Event is a generation event with what the server's generations are.
type Event struct {
	toolgen.Event
	// Server names the server of Event.Slot; Pinned is false for a
	// streamable-HTTP server, whose code cannot be pinned.
	Server string
	Pinned bool
	// Generations, for EventActivated, are the generations of the plan
	// activated.
	Generations []Generation
}

// Generation describes one generation of a server's tools.
type Generation struct {
	ID     string
	Slot   int
	Server string
	Pinned bool
	PID    int // the stdio server's process; 0 for HTTP
	Tools  []client.Info
}

// Source is a plan.Source over the compiled tools and the active tool set
// of each configured MCP server.
type Source struct {
	cfg  Config
	set  *toolgen.Set
	wg   sync.WaitGroup
	stop chan struct{}
	once sync.Once
	// ctx ends when the source closes: it bounds an approval's wait.
	ctx    context.Context
	cancel context.CancelFunc
}

var _ plan.Source = (*Source)(nil)

// New connects every configured server and activates the first plan. On
// error nothing is left running.
func New(ctx context.Context, cfg Config) (*Source, error) {
	s := &Source{cfg: cfg, stop: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	set, err := toolgen.New(toolgen.Config{PlanPrefix: cfg.PlanPrefix, Compiled: cfg.Compiled, Slots: len(cfg.Servers),
		DrainTimeout: cfg.DrainTimeout, ShutdownTimeout: cfg.ShutdownTimeout,
		MaxRetainedPlans: cfg.MaxRetainedPlans, OnEvent: s.onEvent})
	if err != nil {
		return nil, err
	}
	s.set = set
	var gens []*toolgen.Gen
	for i, sc := range cfg.Servers {
		g, err := s.connect(ctx, i, sc)
		if err != nil {
			s.abort()
			return nil, err
		}
		gens = append(gens, g)
	}
	evs, err := set.Activate(gens...)
	if err != nil {
		s.abort()
		return nil, err
	}
	set.Emit(evs)
	return s, nil
}

func (s *Source) abort() {
	s.once.Do(func() { close(s.stop); s.cancel() })
	s.set.Abort()
	s.wg.Wait()
}

// connect opens a connection for slot i, registers its tools as a
// generation and watches it for list changes.
func (s *Source) connect(ctx context.Context, i int, cfg client.Config) (*toolgen.Gen, error) {
	srv, err := client.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c := &conn{srv: srv, refs: 1} // its first generation's reference
	g, err := s.set.Add(i, cfg.Name, newUnit(c, srv.Tools(), srv.Info()))
	if err != nil {
		_ = srv.Close()
		return nil, err
	}
	s.wg.Add(1)
	go s.watch(i, c)
	return g, nil
}

// watch turns each list change of c into a candidate while c serves.
func (s *Source) watch(i int, c *conn) {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-c.closed():
			return
		case <-c.srv.ListChanged():
		}
		_, _ = s.relist(i, c)
	}
}

// relist lists c's tools again and activates them, verified, for future
// leases, if c still serves slot i.
func (s *Source) relist(i int, c *conn) (toolgen.Info, error) {
	old := s.set.Active(i)
	if old == nil || old.Unit().(*unit).c != c {
		return toolgen.Info{}, toolgen.ErrStale
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Servers[i].ListTimeout+time.Second)
	if s.cfg.Servers[i].ListTimeout == 0 {
		ctx, cancel = context.WithTimeout(context.Background(), client.DefaultListTimeout+time.Second)
	}
	tools, infos, err := c.srv.Relist(ctx)
	cancel()
	if err != nil {
		s.set.Emit([]toolgen.Event{{Kind: toolgen.EventCandidateFailed, Slot: i, Reason: err.Error()}})
		return toolgen.Info{}, err
	}
	if !c.acquire() {
		return toolgen.Info{}, toolgen.ErrStale
	}
	g, err := s.set.Add(i, s.cfg.Servers[i].Name, newUnit(c, tools, infos))
	if err != nil {
		c.release()
		return toolgen.Info{}, err
	}
	if err := s.approve(old, g); err != nil {
		return toolgen.Info{}, err
	}
	return s.activate(old, g)
}

// approve asks Config.Approve about g when its definitions differ from
// old's; a refused g is discarded and reported.
func (s *Source) approve(old, g *toolgen.Gen) error {
	if s.cfg.Approve == nil {
		return nil
	}
	next := g.Unit().(*unit).infos
	var prev []client.Info
	if old != nil {
		prev = old.Unit().(*unit).infos
	}
	if sameDefinitions(prev, next) {
		return nil
	}
	i := g.Slot()
	ok, err := s.cfg.Approve(s.ctx, Candidate{Server: s.cfg.Servers[i].Name, Slot: i,
		Pinned: s.cfg.Servers[i].URL == "", Tools: next, Active: prev})
	if err == nil && !ok {
		err = ErrNotApproved
	}
	if err != nil {
		s.set.Discard(g)
		s.set.Emit([]toolgen.Event{{Kind: toolgen.EventCandidateFailed, Slot: i, Generation: g.ID(), Reason: err.Error()}})
		return err
	}
	return nil
}

// sameDefinitions: the same tools with the same definition digests.
func sameDefinitions(a, b []client.Info) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[string]string, len(a))
	for _, in := range a {
		m[in.Name] = in.Digest
	}
	for _, in := range b {
		if d, ok := m[in.Name]; !ok || d != in.Digest {
			return false
		}
	}
	return true
}

func (s *Source) activate(old, g *toolgen.Gen) (toolgen.Info, error) {
	evs, err := s.set.Replace(old, g)
	if err != nil {
		s.set.Discard(g)
		if errors.Is(err, toolgen.ErrClosed) {
			return toolgen.Info{}, ErrClosed
		}
		if !errors.Is(err, toolgen.ErrStale) {
			s.set.Emit([]toolgen.Event{{Kind: toolgen.EventCandidateFailed, Slot: g.Slot(), Reason: err.Error()}})
		}
		return toolgen.Info{}, err
	}
	s.set.Emit(evs)
	return s.set.Info(g), nil
}

// Reconnect connects server i afresh and, once its tools are verified,
// activates them for future leases; the old connection ends once no lease
// holds a generation of it. A failed candidate leaves the active one.
func (s *Source) Reconnect(ctx context.Context, i int) (toolgen.Info, error) {
	if s.set.Closed() {
		return toolgen.Info{}, ErrClosed
	}
	if i < 0 || i >= len(s.cfg.Servers) {
		return toolgen.Info{}, errors.New("mcp source: no server slot " + strconv.Itoa(i))
	}
	old := s.set.Active(i)
	g, err := s.connect(ctx, i, s.cfg.Servers[i])
	if err != nil {
		s.set.Emit([]toolgen.Event{{Kind: toolgen.EventCandidateFailed, Slot: i, Reason: err.Error()}})
		return toolgen.Info{}, err
	}
	if err := s.approve(old, g); err != nil {
		return toolgen.Info{}, err
	}
	return s.activate(old, g)
}

// onEvent enriches a generation event with the servers' names, pins and
// tools.
func (s *Source) onEvent(ev toolgen.Event) {
	if s.cfg.OnEvent == nil {
		return
	}
	out := Event{Event: ev}
	if ev.Slot >= 0 && ev.Slot < len(s.cfg.Servers) {
		out.Server = s.cfg.Servers[ev.Slot].Name
		out.Pinned = s.cfg.Servers[ev.Slot].URL == ""
	}
	if ev.Kind == toolgen.EventActivated {
		if cur := s.set.Current(); cur.Plan == ev.Plan {
			out.Generations = generations(s.cfg.Servers, cur.Generations)
		}
		out.Server, out.Pinned = "", false
	}
	s.cfg.OnEvent(out)
}

// Plan describes the generations of the plan planID (a plan of this
// source); false once it is not retained.
func (s *Source) Plan(planID plan.ID) ([]Generation, bool) {
	pi, ok := s.set.Plan(planID)
	if !ok {
		return nil, false
	}
	return generations(s.cfg.Servers, pi.Generations), true
}

func generations(cfgs []client.Config, infos []toolgen.Info) []Generation {
	out := make([]Generation, 0, len(infos))
	for _, in := range infos {
		u, ok := in.Unit.(*unit)
		if !ok || in.Slot < 0 || in.Slot >= len(cfgs) {
			continue
		}
		out = append(out, Generation{ID: in.ID, Slot: in.Slot, Server: cfgs[in.Slot].Name,
			Pinned: cfgs[in.Slot].URL == "", PID: u.c.srv.PID(), Tools: append([]client.Info(nil), u.infos...)})
	}
	return out
}

// Lease returns a lease on the current plan.
func (s *Source) Lease(ctx context.Context) (*plan.Lease, error) {
	l, err := s.set.Lease(ctx)
	return l, closedErr(err)
}

// LeaseExact returns a lease on the plan planID while the source retains
// it.
func (s *Source) LeaseExact(ctx context.Context, planID plan.ID) (*plan.Lease, error) {
	l, err := s.set.LeaseExact(ctx, planID)
	return l, closedErr(err)
}

func closedErr(err error) error {
	if errors.Is(err, toolgen.ErrClosed) {
		return ErrClosed
	}
	return err
}

// Current describes the plan future leases get.
func (s *Source) Current() toolgen.PlanInfo { return s.set.Current() }

// Generations describes every generation, oldest first.
func (s *Source) Generations() []toolgen.Info { return s.set.Generations() }

// Close refuses new leases, drains every generation within the shutdown
// bound and ends every connection.
func (s *Source) Close() error {
	s.once.Do(func() { close(s.stop); s.cancel() })
	err := s.set.Close()
	s.wg.Wait()
	return err
}
