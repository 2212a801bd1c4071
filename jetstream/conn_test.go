package jetstream

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// lines is a log destination that hands each line to the test as it is
// written.
type lines struct {
	mu  sync.Mutex
	all []string
	ch  chan string
}

func newLines() *lines { return &lines{ch: make(chan string, 64)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range strings.SplitSeq(strings.TrimSuffix(string(p), "\n"), "\n") {
		l.all = append(l.all, line)
		select {
		case l.ch <- line:
		default:
		}
	}
	return len(p), nil
}

func (l *lines) next(t *testing.T, ctx context.Context) string {
	t.Helper()
	select {
	case s := <-l.ch:
		return s
	case <-ctx.Done():
		t.Fatalf("no log line: %v", ctx.Err())
		return ""
	}
}

func (l *lines) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.all...)
}

// startAuthServer starts a NATS server with JetStream on dir that wants
// a user and password, on port (0: a free one).
func startAuthServer(t *testing.T, dir string, port int) *server.Server {
	t.Helper()
	if port == 0 {
		port = server.RANDOM_PORT
	}
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: port, NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: dir, JetStreamMaxStore: 1 << 30, JetStreamMaxMemory: 64 << 20,
		Username: "spice", Password: "s3cret-pw",
	})
	require.NoError(t, err)
	s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second))
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

func portOf(t *testing.T, s *server.Server) int {
	t.Helper()
	return s.Addr().(*net.TCPAddr).Port
}

// refuseAttempts holds the stopped server's port and drops n connection
// attempts, so that a test knows reconnection was tried and failed.
func refuseAttempts(t *testing.T, port, n int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, err)
	defer ln.Close()
	for range n {
		c, err := ln.Accept()
		require.NoError(t, err)
		_ = c.Close()
	}
}

// awaitHealth waits until the backend's health satisfies ok.
func awaitHealth(t *testing.T, ctx context.Context, b *Backend, ok func(job.Health) bool) job.Health {
	t.Helper()
	for {
		h, changed := b.Health()
		if ok(h) {
			return h
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("health stayed %+v: %v", h, ctx.Err())
		}
	}
}

func available(h job.Health) bool { return h.Available }
func down(h job.Health) bool      { return !h.Available }

// TestD4_ALostConnectionIsLoggedOnceAndFailsFast: the NATS server is
// stopped and restarted on the same storage and port. The connection's
// loss and its return are logged once each, structured, whatever the
// failed attempts between, with the URL's password redacted; the
// backend's health follows; calls while it is down fail at once with
// job.ErrUnavailable, and succeed again after, with the acknowledged job
// still there.
func TestD4_ALostConnectionIsLoggedOnceAndFailsFast(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	s1 := startAuthServer(t, dir, 0)
	port := portOf(t, s1)
	url := fmt.Sprintf("nats://spice:s3cret-pw@127.0.0.1:%d", port)
	logs := newLines()
	nc, err := Connect(url, ConnectConfig{Name: "test", Log: slog.New(slog.NewTextHandler(logs, nil)), ReconnectWait: 20 * time.Millisecond})
	require.NoError(t, err)
	defer nc.Close()
	b, err := Open(ctx, testConfig(nc, "conn"))
	require.NoError(t, err)
	h, _ := b.Health()
	require.Equal(t, job.Health{Available: true, Name: "NATS", State: "connected", Since: h.Since}, h)
	_, err = b.Submit(ctx, job.Job{ID: "before", Spec: []byte("ok")})
	require.NoError(t, err)

	s1.Shutdown()
	s1.WaitForShutdown()
	lost := logs.next(t, ctx)
	t.Log(lost)
	require.Contains(t, lost, `level=WARN msg="NATS connection lost; reconnecting"`)
	require.Contains(t, lost, fmt.Sprintf("url=nats://spice:xxxxx@127.0.0.1:%d", port))
	require.Contains(t, lost, "error=")
	h = awaitHealth(t, ctx, b, down)
	require.Equal(t, "reconnecting", h.State)
	// The server comes back only after these calls have returned, on a
	// context that ends with the test: a call that waited for an
	// answer would not return here, and if it did, not with
	// job.ErrUnavailable.
	_, err = b.Submit(ctx, job.Job{ID: "while-down", Spec: []byte("ok")})
	require.ErrorIs(t, err, job.ErrUnavailable)
	_, err = b.Status(ctx, "before")
	require.ErrorIs(t, err, job.ErrUnavailable)
	_, err = b.ListPairs(ctx, store.ListOptions{})
	require.ErrorIs(t, err, job.ErrUnavailable)
	var listed []error
	for _, err := range b.Statuses(ctx, 0) {
		listed = append(listed, err)
	}
	require.Len(t, listed, 1, "Statuses says why it lists nothing")
	require.ErrorIs(t, listed[0], job.ErrUnavailable)
	require.ErrorIs(t, b.Cancel(ctx, "before"), job.ErrUnavailable)

	refuseAttempts(t, port, 3)
	startAuthServer(t, dir, port)
	restored := logs.next(t, ctx)
	require.Contains(t, restored, `level=INFO msg="NATS connection restored"`)
	require.Contains(t, restored, "down=")
	awaitHealth(t, ctx, b, available)
	st, err := b.Status(ctx, "before")
	require.NoError(t, err)
	require.Equal(t, job.Queued, st.State)
	_, err = b.Submit(ctx, job.Job{ID: "after", Spec: []byte("ok")})
	require.NoError(t, err)
	var ids []string
	for st, err := range b.Statuses(ctx, 0) {
		require.NoError(t, err)
		ids = append(ids, st.ID)
	}
	require.Equal(t, []string{"before", "after"}, ids)

	all := logs.snapshot()
	require.Len(t, all, 2, "one line per transition: %q", all)
	for _, l := range all {
		require.NotContains(t, l, "s3cret-pw")
	}
}

// TestD4_RedactHidesPasswordsAndTokens: a password, and a user without
// one (a token), never leave Redact.
func TestD4_RedactHidesPasswordsAndTokens(t *testing.T) {
	require.Equal(t, "nats://u:xxxxx@h:1,nats://xxxxx@h2:2,nats://h3:3",
		Redact("nats://u:pw@h:1, nats://tok@h2:2,nats://h3:3"))
	l := &connLog{secrets: secrets("nats://u:pw1@h:1,nats://tok2@h2:2")}
	require.Equal(t, "dial xxxxx and xxxxx", l.scrub("dial pw1 and tok2"))
	require.LessOrEqual(t, len(l.scrub(strings.Repeat("e", 10_000))), maxLogError+len("…"))

	// A password with an @ and a %, and a token with them, in every
	// form an error text may quote: decoded, escaped for a path or a
	// query, re-encoded as userinfo, and as written.
	l = &connLog{secrets: secrets("nats://u:p%40ss%25w@h:1,nats://t%40k%25n@h2:2")}
	for _, sec := range []string{"p@ss%w", "t@k%n"} {
		for _, form := range []string{sec, url.PathEscape(sec), url.QueryEscape(sec), url.User(sec).String()} {
			require.Equal(t, "at xxxxx.", l.scrub("at "+form+"."), form)
		}
	}
	require.Equal(t, "at xxxxx.", l.scrub("at u:p%40ss%25w."))
	require.Equal(t, "at xxxxx.", l.scrub("at t%40k%25n."))

	// An unparsable URL's error text quotes it whole.
	for _, raw := range []string{"nats://tok3n@127.0.0.1:x", "nats://u:p%40ss%25w@127.0.0.1:x"} {
		_, err := Connect(raw, ConnectConfig{DialTimeout: time.Second})
		require.Error(t, err)
		require.Contains(t, err.Error(), "@127.0.0.1:x", "the error quotes the URL")
		for _, sec := range []string{"tok3n", "p%40ss", "p@ss"} {
			require.NotContains(t, err.Error(), sec)
		}
	}
}

// TestD4_HealthAndFailFastAgree: whenever the backend's health says
// the connection is not available, its calls fail at once with
// job.ErrUnavailable, and the other way round: a connection being
// drained (closing for good) is neither.
func TestD4_HealthAndFailFastAgree(t *testing.T) {
	now := time.Now()
	for _, st := range []nats.Status{nats.DISCONNECTED, nats.CONNECTED, nats.CLOSED, nats.RECONNECTING,
		nats.CONNECTING, nats.DRAINING_SUBS, nats.DRAINING_PUBS} {
		err := statusErr(st)
		require.Equal(t, healthOf(st, now).Available, err == nil, st.String())
		if err != nil {
			require.ErrorIs(t, err, job.ErrUnavailable)
		}
	}

	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	nc := connect(t, s.ClientURL())
	b, err := Open(ctx, testConfig(nc, "drain"))
	require.NoError(t, err)
	_, err = b.Submit(ctx, job.Job{ID: "j", Spec: []byte("ok")})
	require.NoError(t, err)
	// A subscription whose handler is busy holds the drain in its
	// first phase.
	entered, release := make(chan struct{}), make(chan struct{})
	_, err = nc.Subscribe("busy", func(*nats.Msg) { close(entered); <-release })
	require.NoError(t, err)
	require.NoError(t, nc.Publish("busy", nil))
	<-entered
	require.NoError(t, nc.Drain())
	h := awaitHealth(t, ctx, b, func(h job.Health) bool { return h.State == "draining" })
	require.False(t, h.Available)
	_, err = b.Status(ctx, "j")
	require.ErrorIs(t, err, job.ErrUnavailable)
	close(release)
	awaitHealth(t, ctx, b, func(h job.Health) bool { return h.State == "closed" })
}

// proxy forwards loopback connections to a NATS server, and can cut
// them: a worker's own connection lost while the server stays up.
type proxy struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
	wg    sync.WaitGroup
	// drop, per direction, makes the proxy drop every byte from then on,
	// as a network would the bytes in flight when a server stops;
	// dropped is signalled at each drop.
	drop    [2]bool
	dropped chan struct{}
	// hold, per direction, makes the proxy keep the bytes from then on
	// until it is closed (release).
	hold [2]chan struct{}
}

// holdFrom keeps every byte in direction dir until release.
func (p *proxy) holdFrom(dir int) {
	p.mu.Lock()
	p.hold[dir] = make(chan struct{})
	p.mu.Unlock()
}

// release sends on what holdFrom kept.
func (p *proxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, h := range p.hold {
		if h != nil {
			close(h)
			p.hold[i] = nil
		}
	}
}

// The directions of a proxy's bytes.
const (
	toServer = iota
	toClient
)

// dropFrom drops every byte in direction dir until cut.
func (p *proxy) dropFrom(dir int) {
	p.mu.Lock()
	p.drop[dir] = true
	p.mu.Unlock()
}

// pipe copies src to dst, dropping what the proxy drops.
func (p *proxy) pipe(dst, src net.Conn, dir int) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop, hold := p.drop[dir], p.hold[dir]
			p.mu.Unlock()
			if hold != nil {
				<-hold
			}
			if drop {
				select {
				case p.dropped <- struct{}{}:
				default:
				}
			} else if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	p := &proxy{target: target, dropped: make(chan struct{}, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) url() string { return "nats://" + p.addr }

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Go(func() { p.pipe(up, c, toServer) })
			p.wg.Go(func() { p.pipe(c, up, toClient) })
		}
	})
}

// cut closes the listener and every connection, and waits for the
// copies to end.
func (p *proxy) cut() {
	p.release()
	p.mu.Lock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.drop = [2]bool{}
	p.mu.Unlock()
	p.wg.Wait()
}

// restore listens again on the same address.
func (p *proxy) restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(t, err)
	p.serve(ln)
}

// awayWorker is a worker whose connection goes through a proxy, playing
// "block" jobs until they are cancelled, then publishing its pair's
// terminal as a pair would; each play's end is sent on ended.
type awayWorker struct {
	b       *Backend
	px      *proxy
	logs    *lines
	started chan struct{} // a play began
	ended   chan playEnd
}

type playEnd struct {
	cause   error // why the play's context ended
	publish error // what publishing the terminal then returned
}

// terminalEvent is a pair's first event, its terminal.
func terminalEvent(t *testing.T, ctx context.Context) eventlog.Event {
	t.Helper()
	l, err := eventlog.New(eventlog.Config{Name: "terminal", MaxEvents: 16, MaxBytes: 1 << 20})
	require.NoError(t, err)
	raw, err := eventlog.NewRaw([]byte(`{}`))
	require.NoError(t, err)
	e, err := l.Append(ctx, eventlog.Record{Kind: orchestrator.KindCompleted, Time: time.Now(), Terminal: true, Payload: raw})
	require.NoError(t, err)
	return e
}

func startAwayWorker(t *testing.T, ctx context.Context, s *server.Server, name string) *awayWorker {
	t.Helper()
	px := startProxy(t, s.Addr().String())
	logs := newLines()
	nc, err := Connect(px.url(), ConnectConfig{Name: "away", Log: slog.New(slog.NewTextHandler(logs, nil)), ReconnectWait: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	b, err := Open(ctx, testConfig(nc, name))
	require.NoError(t, err)
	w := &awayWorker{b: b, px: px, logs: logs, started: make(chan struct{}, 4), ended: make(chan playEnd, 4)}
	terminal := terminalEvent(t, ctx)
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Work(wctx, WorkerConfig{Pairs: 1, Drain: time.Second, Play: func(ctx context.Context, j job.Job) job.Report {
			pub, err := b.Timeline(j.ID, TimelineConfig{})
			if err != nil {
				panic(err)
			}
			w.started <- struct{}{}
			<-ctx.Done()
			w.ended <- playEnd{cause: context.Cause(ctx), publish: pub.Observe(context.WithoutCancel(ctx), terminal)}
			return job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Cancelled, Reason: "cancelled"}
		}})
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return w
}

// away waits until the worker plays, cuts its connection and waits
// until it knows.
func (w *awayWorker) away(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-w.started:
	case <-ctx.Done():
		t.Fatal("the worker did not start playing")
	}
	w.px.cut()
	awaitHealth(t, ctx, w.b, down)
	require.Contains(t, w.logs.next(t, ctx), "NATS connection lost")
}

func (w *awayWorker) back(t *testing.T, ctx context.Context) {
	t.Helper()
	w.px.restore(t)
	require.Contains(t, w.logs.next(t, ctx), "NATS connection restored")
}

// TestD1_AWorkerHearsACancelPutWhileItWasAway: a cancel request put
// while a worker's connection was down reached no subscription of it;
// once reconnected the worker reads it and its job ends cancelled.
func TestD1_AWorkerHearsACancelPutWhileItWasAway(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "awaycancel"))
	require.NoError(t, err)
	w := startAwayWorker(t, ctx, s, "awaycancel")
	id := submitN(t, ctx, b, "blocked", "block", 1)[0]
	waitState(t, ctx, b, id, running)

	w.away(t, ctx)
	require.NoError(t, b.Cancel(ctx, id))
	w.back(t, ctx)
	select {
	case end := <-w.ended:
		require.ErrorIs(t, end.cause, context.Canceled)
		require.NoError(t, end.publish)
	case <-ctx.Done():
		t.Fatal("the worker did not hear the cancel put while it was away")
	}
	st, err := b.Await(ctx, id)
	require.NoError(t, err)
	require.Equal(t, job.Cancelled, st.State)
}

// TestD1_AWorkerLetsGoOfAJobTakenOverWhileItWasAway: while a worker's
// connection is down its heartbeats stop, and after AckWait another
// worker takes the job over (attempt 2). Once back, the first worker
// stops its play with errLeaseLost, publishes nothing more of it, and
// settles nothing: the job ends once, by its second attempt.
func TestD1_AWorkerLetsGoOfAJobTakenOverWhileItWasAway(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "awaylease"))
	require.NoError(t, err)
	tm := watchTerminals(t, b)
	w := startAwayWorker(t, ctx, s, "awaylease")
	id := submitN(t, ctx, b, "blocked", "block", 1)[0]
	waitState(t, ctx, b, id, running)

	w.away(t, ctx)
	resumed, release := make(chan struct{}), make(chan struct{})
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Work(wctx, WorkerConfig{Pairs: 1, Drain: time.Second, Play: scripted,
			Resume: func(ctx context.Context, j job.Job) job.Report {
				close(resumed)
				select {
				case <-release:
				case <-ctx.Done(): // the test failed first
					return job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Cancelled, Reason: "cancelled"}
				}
				return job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Completed, Reason: "completed"}
			}})
	}()
	defer func() { stop(); require.NoError(t, <-done) }()
	select {
	case <-resumed:
	case <-ctx.Done():
		t.Fatal("the job was not delivered again")
	}
	w.back(t, ctx)
	select {
	case end := <-w.ended:
		require.ErrorIs(t, end.cause, errLeaseLost)
		require.ErrorIs(t, end.publish, errLeaseLost, "a lost play publishes nothing")
	case <-ctx.Done():
		t.Fatal("the worker kept playing a job another delivery holds")
	}
	for _, err := range b.Events(ctx, id, 0, false) {
		require.ErrorIs(t, err, job.ErrNotFound, "the lost play's terminal reached the events stream")
	}
	close(release)
	st, err := b.Await(ctx, id)
	require.NoError(t, err)
	require.Equal(t, job.Completed, st.State)
	require.Equal(t, 2, st.Attempt)
	tm.caughtUp(t, ctx)
	tm.mu.Lock()
	defer tm.mu.Unlock()
	require.Equal(t, 1, tm.count[id])
}
