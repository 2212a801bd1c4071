package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/server"
)

// serveLimited serves h's server through its own http.Server and a
// listener of at most conns connections, and returns the address.
func serveLimited(t *testing.T, h *harness, conns int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := h.srv.HTTPServer()
	done := make(chan error, 1)
	go func() { done <- hs.Serve(server.LimitListener(ln, conns)) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		_ = hs.Close()
		require.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	return ln.Addr().String()
}

// TestS3_AClientWithoutTheTokenHoldsNoConnection: a client that sends the
// headers of a POST and never its body is answered 401 at once and its
// connection closed; connections that never prove the token are closed to
// make room, so they cannot keep a client with the token out.
func TestS3_AClientWithoutTheTokenHoldsNoConnection(t *testing.T) {
	h := newHarness(t, options{token: secret, mutate: func(c *server.Config) {
		// Far longer than the test waits: nothing below may rely on them.
		c.HeaderTimeout, c.BodyTimeout = time.Hour, time.Hour
	}})
	addr := serveLimited(t, h, 2)

	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		// A bound on every read below, far under the server's timeouts.
		require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
		return c
	}
	// Headers of a POST that promise a body never sent.
	for range 2 {
		c := dial()
		_, err := io.WriteString(c, "POST /v1/pairs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err, "the 401 must not wait for the body")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		_, err = c.Read(make([]byte, 1))
		require.ErrorIs(t, err, io.EOF, "the connection must be closed")
	}
	// Every slot taken by a connection that sends nothing, then half a
	// request: neither proved the token.
	for _, part := range []string{"", "GET /v1/pairs HTTP/1.1\r\nHost: 127.0.0.1\r\n"} {
		c := dial()
		_, err := io.WriteString(c, part)
		require.NoError(t, err)
	}
	// A client with the token still gets in, twice over.
	for range 2 {
		c := dial()
		_, err := io.WriteString(c, "GET /v1/pairs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+secret+"\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err, "a client with the token must not be kept out")
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		require.True(t, strings.HasPrefix(string(b), `{"pairs":`))
	}
}

// TestS3_EveryReadIsBounded: a connection that sends half its headers, or
// headers and half a body, or nothing after a response, is closed by the
// server's own timeouts.
func TestS3_EveryReadIsBounded(t *testing.T) {
	h := newHarness(t, options{token: secret, mutate: func(c *server.Config) {
		c.HeaderTimeout, c.BodyTimeout, c.IdleTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	}})
	addr := serveLimited(t, h, 8)
	for name, req := range map[string]string{
		"header": "GET /v1/pairs HTTP/1.1\r\nHost: 127.0.0.1\r\n",
		"body": "POST /v1/pairs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + secret +
			"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
		"idle": "GET /v1/pairs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + secret + "\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
			_, err = io.WriteString(c, req)
			require.NoError(t, err)
			// Whatever the server answers, it then closes the connection.
			_, err = io.Copy(io.Discard, c)
			require.NoError(t, err, "the server must close the connection itself")
		})
	}
}
