package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spice-orch/spice-orch/job"
)

// Defaults of ConnectConfig: how a lost connection is reconnected.
const (
	DefaultReconnectWait = time.Second
	DefaultDialTimeout   = 2 * time.Second
	DefaultReconnectBuf  = 1 << 20
	// maxLogError bounds the error text of a log record.
	maxLogError = 256
)

// ConnectConfig configures Connect.
type ConnectConfig struct {
	// Name is the connection's name on the server, e.g. "spice-orch
	// worker".
	Name string
	// Log receives one record per change of the connection: lost,
	// restored, closed for good. The server's URL in it has no
	// credentials. nil logs nothing.
	Log *slog.Logger
	// ReconnectWait is the pause between two attempts to reconnect (plus
	// up to a tenth of it at random); 0 means DefaultReconnectWait.
	// DialTimeout bounds each attempt; 0 means DefaultDialTimeout.
	ReconnectWait time.Duration
	DialTimeout   time.Duration
	// MaxReconnects bounds the attempts in a row before the connection
	// closes for good; 0 means no bound: a NATS server restarted after
	// an hour is found again.
	MaxReconnects int
	// ReconnectBuf bounds the bytes published while reconnecting, sent
	// once reconnected; 0 means DefaultReconnectBuf.
	ReconnectBuf int
}

// Connect connects to the NATS server at rawURL (or a comma-separated
// list of them) with bounded reconnection, and logs each loss and
// recovery of the connection once, through nats.go's own handlers.
func Connect(rawURL string, cfg ConnectConfig) (*nats.Conn, error) {
	if cfg.ReconnectWait <= 0 {
		cfg.ReconnectWait = DefaultReconnectWait
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.ReconnectBuf <= 0 {
		cfg.ReconnectBuf = DefaultReconnectBuf
	}
	maxReconnects := cfg.MaxReconnects
	if maxReconnects <= 0 {
		maxReconnects = -1
	}
	l := &connLog{log: cfg.Log, url: Redact(rawURL), secrets: secrets(rawURL)}
	nc, err := nats.Connect(rawURL,
		nats.Name(cfg.Name),
		nats.MaxReconnects(maxReconnects),
		nats.ReconnectWait(cfg.ReconnectWait),
		nats.ReconnectJitter(cfg.ReconnectWait/10, cfg.ReconnectWait/10),
		nats.Timeout(cfg.DialTimeout),
		nats.ReconnectBufSize(cfg.ReconnectBuf),
		nats.DisconnectErrHandler(l.lost),
		nats.ReconnectHandler(l.restored),
		nats.ClosedHandler(l.closed),
		nats.ErrorHandler(l.async),
	)
	if err != nil {
		return nil, &scrubbed{msg: l.scrub(err.Error()), err: err}
	}
	return nc, nil
}

// scrubbed is an error whose text has no credentials; it still matches
// what it wraps (nats.ErrNoServers, ...).
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// connLog writes the connection's transitions, each once: nats.go calls
// its handlers one at a time, in order.
type connLog struct {
	log     *slog.Logger
	url     string
	secrets []string

	mu   sync.Mutex
	down time.Time // when the connection was lost; zero while up
	// lastAsync is when an asynchronous error was last logged, quiet
	// how many came since without a line.
	lastAsync time.Time
	quiet     int
}

func (l *connLog) lost(_ *nats.Conn, err error) {
	if err == nil {
		return // this process closed the connection
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.down.IsZero() {
		return
	}
	l.down = time.Now()
	if l.log != nil {
		l.log.Warn("NATS connection lost; reconnecting", "url", l.url, "error", l.scrub(err.Error()))
	}
}

// async logs an asynchronous error of the client, at most one a
// second: a connection reset or a slow consumer comes in bursts.
func (l *connLog) async(_ *nats.Conn, _ *nats.Subscription, err error) {
	if err == nil || l.log == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !l.lastAsync.IsZero() && now.Sub(l.lastAsync) < time.Second {
		l.quiet++
		return
	}
	l.lastAsync = now
	args := []any{"url", l.url, "error", l.scrub(err.Error())}
	if l.quiet > 0 {
		args = append(args, "suppressed", l.quiet)
		l.quiet = 0
	}
	l.log.Warn("NATS client error", args...)
}

func (l *connLog) restored(*nats.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var down time.Duration
	if !l.down.IsZero() {
		down = time.Since(l.down).Round(time.Millisecond)
	}
	l.down = time.Time{}
	if l.log != nil {
		l.log.Info("NATS connection restored", "url", l.url, "down", down)
	}
}

func (l *connLog) closed(nc *nats.Conn) {
	err := nc.LastError()
	if err == nil {
		return // closed by this process
	}
	if l.log != nil {
		l.log.Error("NATS connection closed; no more reconnect attempts", "url", l.url, "error", l.scrub(err.Error()))
	}
}

// scrub bounds an error's text and removes the URL's credentials from it.
func (l *connLog) scrub(s string) string {
	for _, sec := range l.secrets {
		s = strings.ReplaceAll(s, sec, "xxxxx")
	}
	if len(s) > maxLogError {
		s = s[:maxLogError] + "…"
	}
	return s
}

// Redact returns the NATS URL (or comma-separated URLs) with the
// credentials replaced: a password by xxxxx, a user without one (a
// token) as well.
func Redact(rawURL string) string {
	parts := strings.Split(rawURL, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		u, err := url.Parse(p)
		switch {
		case err != nil:
			parts[i] = "(unparsable URL)"
			continue
		case u.User == nil:
		case hasPassword(u.User):
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		default:
			u.User = url.User("xxxxx")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

func hasPassword(u *url.Userinfo) bool { _, ok := u.Password(); return ok }

// secrets lists the credentials the URLs carry, to be scrubbed from
// error texts: a password (or a token: a user without one) decoded,
// escaped as a path, a query or userinfo would escape it, and as
// written, with the userinfo as written. The URL is not parsed for
// them, since the error of an unparsable one quotes it.
func secrets(rawURL string) []string {
	var out []string
	add := func(s string) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for p := range strings.SplitSeq(rawURL, ",") {
		info, ok := userinfo(strings.TrimSpace(p))
		if !ok {
			continue
		}
		user, pw, hasPW := strings.Cut(info, ":")
		sec := pw
		if !hasPW {
			sec = user
		}
		if sec == "" {
			continue
		}
		add(info)
		add(sec)
		if dec, err := url.PathUnescape(sec); err == nil {
			add(dec)
			add(url.PathEscape(dec))
			add(url.QueryEscape(dec))
			add(url.User(dec).String())
		}
	}
	// The longest first: a form that contains another is replaced whole.
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// userinfo returns the userinfo of a URL as written: what precedes the
// host's last @.
func userinfo(raw string) (string, bool) {
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		raw = rest
	}
	if i := strings.IndexAny(raw, "/?#"); i >= 0 {
		raw = raw[:i]
	}
	i := strings.LastIndex(raw, "@")
	if i < 0 {
		return "", false
	}
	return raw[:i], true
}

// health follows the backend's connection through its status changes:
// the backend's job.Monitor.
type health struct {
	mu      sync.Mutex
	h       job.Health
	changed chan struct{}
}

// watchHealth starts following nc's status. Its goroutine ends once nc
// is closed.
func watchHealth(nc *nats.Conn) *health {
	// Every status, the draining ones too: nats.go's default list
	// leaves them out.
	ch := nc.StatusChanged(nats.CONNECTED, nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED,
		nats.CONNECTING, nats.DRAINING_SUBS, nats.DRAINING_PUBS)
	hs := &health{changed: make(chan struct{})}
	hs.h = healthOf(nc.Status(), time.Now())
	go func() {
		defer nc.RemoveStatusListener(ch)
		for range ch {
			// A status read now, not the one sent: the channel may have
			// dropped one when full, never the last.
			st := nc.Status()
			hs.set(healthOf(st, time.Now()))
			if st == nats.CLOSED {
				return
			}
		}
	}()
	return hs
}

func healthOf(st nats.Status, now time.Time) job.Health {
	h := job.Health{Name: "NATS", Since: now.UTC()}
	// A connection being drained is closing for good: it takes no new
	// subscription, which every request needs, so it is as unavailable
	// as up says.
	switch st {
	case nats.CONNECTED:
		h.Available, h.State = true, "connected"
	case nats.DRAINING_SUBS, nats.DRAINING_PUBS:
		h.State = "draining"
	case nats.CLOSED:
		h.State = "closed"
	default:
		h.State = "reconnecting"
	}
	return h
}

func (hs *health) set(h job.Health) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if h.State == hs.h.State {
		return
	}
	hs.h = h
	close(hs.changed)
	hs.changed = make(chan struct{})
}

func (hs *health) get() (job.Health, <-chan struct{}) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.h, hs.changed
}

// Health returns the health of the backend's connection and a channel
// closed at its next change. While it is not Available, every call that
// needs the server fails at once with an error matching
// job.ErrUnavailable.
func (b *Backend) Health() (job.Health, <-chan struct{}) { return b.health.get() }

var _ job.Monitor = (*Backend)(nil)

// up fails fast while the connection is down.
func (b *Backend) up() error { return statusErr(b.cfg.Conn.Status()) }

func statusErr(st nats.Status) error {
	if st != nats.CONNECTED {
		return fmt.Errorf("%w: NATS connection %s", job.ErrUnavailable, strings.ToLower(st.String()))
	}
	return nil
}

// unavailable marks an error of a call that did not reach the server, or
// that the server's JetStream did not answer, as job.ErrUnavailable.
func unavailable(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, job.ErrUnavailable) {
		return err
	}
	switch {
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, jetstream.ErrAsyncPublishTimeout), errors.Is(err, jetstream.ErrTooManyStalledMsgs),
		errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("%w: %w", job.ErrUnavailable, err)
	}
	return err
}
