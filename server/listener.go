package server

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// LimitListener returns a listener that holds at most n accepted
// connections open at once (S3). When all n are open, Accept closes the
// oldest connection that has not yet carried a request the server let
// through (one without the token, or one that sent nothing) to make room;
// only when every open connection has done so does it wait for one to
// close. So clients without the token cannot keep out a client with it.
// Serve it with the http.Server of Server.HTTPServer, which tells the
// listener which connections proved themselves.
func LimitListener(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, n: max(n, 1), freed: make(chan struct{}, 1), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	n         int
	freed     chan struct{} // a connection closed
	done      chan struct{}
	closeOnce sync.Once

	mu    sync.Mutex
	conns []*limitConn // guarded by mu; open connections, oldest first
}

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &limitConn{Conn: c, l: l}
	// Room is made only once a connection is waiting for it, so a
	// connection accepted just before is not closed for one that may
	// never come.
	for !l.admit(lc) {
		select {
		case <-l.freed:
		case <-l.done:
			_ = c.Close()
			return nil, net.ErrClosed
		}
	}
	return lc, nil
}

// admit takes a slot for c, closing the oldest unproven connection when
// none is free; false means c must wait for one.
func (l *limitListener) admit(c *limitConn) bool {
	l.mu.Lock()
	if len(l.conns) < l.n {
		l.conns = append(l.conns, c)
		l.mu.Unlock()
		return true
	}
	var victim *limitConn
	for _, o := range l.conns {
		if !o.proven.Load() {
			victim = o
			break
		}
	}
	l.mu.Unlock()
	if victim != nil {
		_ = victim.Close()
	}
	return false
}

func (l *limitListener) remove(c *limitConn) {
	l.mu.Lock()
	for i, o := range l.conns {
		if o == c {
			l.conns = append(l.conns[:i], l.conns[i+1:]...)
			break
		}
	}
	l.mu.Unlock()
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	l      *limitListener
	once   sync.Once
	proven atomic.Bool
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.remove(c) })
	return err
}

// prove marks the connection as one that carried a request the server
// let through: it is no longer closed to make room.
func (c *limitConn) prove() { c.proven.Store(true) }

type connKey struct{}

// withConn is the http.Server's ConnContext: the guard finds the
// connection of a request through it.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// prove marks r's connection as proven, if it came from a LimitListener.
func prove(r *http.Request) {
	if c, ok := r.Context().Value(connKey{}).(interface{ prove() }); ok {
		c.prove()
	}
}
