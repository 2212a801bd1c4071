package jetstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/store"
)

// An ID that no job can have (a subject wildcard, a space, a token
// separator at its end) names no job: each read and the cancel say
// not found, never a failure of the backend.
func TestD1_AnIDNoJobCanHaveIsNotFound(t *testing.T) {
	s := startServer(t, t.TempDir())
	ctx := testCtx(t)
	b, err := Open(ctx, Config{Conn: connect(t, s.ClientURL()), Name: "ids"})
	require.NoError(t, err)
	for _, bad := range []string{"a*b", "a b", ">", "a.", "a.>", "a:b", ""} {
		_, err := b.Status(ctx, bad)
		require.ErrorIs(t, err, job.ErrNotFound, "Status(%q)", bad)
		require.ErrorIs(t, b.Cancel(ctx, bad), job.ErrNotFound, "Cancel(%q)", bad)
		_, err = b.Pair(ctx, bad)
		require.ErrorIs(t, err, store.ErrNotFound, "Pair(%q)", bad)
	}
	for _, bad := range []string{"a:b", "a.", ".a", "a..b", "a*b"} {
		_, err := b.Submit(ctx, job.Job{ID: bad, Spec: []byte("relay")})
		require.ErrorIs(t, err, bound.ErrInvalid, "Submit(%q)", bad)
	}
	_, err = b.Submit(ctx, job.Job{ID: "a.b/c_d-e", Spec: []byte("relay")})
	require.NoError(t, err)
}

// An address another process listens on is said at once as such, not
// after the readiness bound as a server that is not ready.
func TestD4_AnEmbeddedServerOnATakenAddressSaysSo(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	start := time.Now()
	s, err := StartEmbedded(EmbeddedConfig{Dir: t.TempDir(), Port: port, Ready: time.Minute})
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	require.ErrorContains(t, err, "127.0.0.1:"+strconv.Itoa(port))
	require.Less(t, time.Since(start), 30*time.Second, "waited out the readiness bound")
}

// An asynchronous error of the client (a write on a connection the
// server reset, a slow consumer) is logged as the connection's other
// changes are: structured, its credentials scrubbed, and bounded in
// rate; nats.go's own handler would print it bare on stderr.
func TestD4_TheClientsAsynchronousErrorsAreLoggedStructured(t *testing.T) {
	s := startServer(t, t.TempDir())
	var out bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewJSONHandler(&lockedWriter{mu: &mu, w: &out}, nil))
	u := strings.Replace(s.ClientURL(), "nats://", "nats://tok3n@", 1)
	nc, err := Connect(u, ConnectConfig{Log: log})
	require.NoError(t, err)
	defer nc.Close()
	require.NotNil(t, nc.Opts.AsyncErrorCB, "no handler: nats.go prints the error bare")
	for range 5 {
		nc.Opts.AsyncErrorCB(nc, nil, errors.New("write tcp: connection reset by peer (tok3n)"))
	}
	mu.Lock()
	defer mu.Unlock()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 1, "five errors within a second make one line: %s", out.String())
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &rec))
	require.Equal(t, "WARN", rec["level"])
	require.Equal(t, "NATS client error", rec["msg"])
	require.Equal(t, "write tcp: connection reset by peer (xxxxx)", rec["error"])
	require.NotContains(t, out.String(), "tok3n")
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
