package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/serve"
	"github.com/spice-orch/spice-orch/jetstream"
)

// natsServe is `serve --nats` in-process on a loopback port, against a
// NATS server the test stops and starts again on the same storage and
// port.
type natsServe struct {
	url    string // serve's
	dir    string // JetStream's storage
	port   int
	ns     *natsserver.Server
	stderr *lines
}

func startNATSServe(t *testing.T) *natsServe {
	t.Helper()
	dir := t.TempDir()
	n := &natsServe{dir: filepath.Join(dir, "js"), stderr: &lines{grew: make(chan struct{}, 1)}}
	n.startNATS(t)
	n.port = n.ns.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { n.stopNATS() })
	f := serveFlags{addr: "127.0.0.1:0", store: filepath.Join(dir, "runs.db"), dataDir: filepath.Join(dir, "data"),
		pairs: 4, queue: 16, maxConns: 64, nats: n.ns.ClientURL(), natsName: "spice"}
	n.url = startServe(t, Env{Stdout: &lines{grew: make(chan struct{}, 1)}, Stderr: n.stderr, Getenv: func(string) string { return "" }},
		f, serveHooks{})
	return n
}

// startNATS starts the NATS server, on the port it had before if any.
func (n *natsServe) startNATS(t *testing.T) {
	t.Helper()
	ns, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{Dir: n.dir, Port: n.port})
	require.NoError(t, err)
	n.ns = ns
}

func (n *natsServe) stopNATS() {
	if n.ns != nil {
		n.ns.Shutdown()
		n.ns.WaitForShutdown()
		n.ns = nil
	}
}

type healthBody struct {
	Backend struct {
		Available bool   `json:"available"`
		Name      string `json:"name"`
		State     string `json:"state"`
	} `json:"backend"`
}

func getHealth(t *testing.T, base string) healthBody {
	t.Helper()
	resp, err := http.Get(base + "/v1/health")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var h healthBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
	return h
}

// awaitHealth follows GET /v1/health as the page does, as Server-Sent
// Events, until the backend's availability is want.
func awaitHealth(t *testing.T, base string, want bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/health", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	buf := make([]byte, 4096)
	var text strings.Builder
	for {
		k, err := resp.Body.Read(buf)
		text.Write(buf[:k])
		for {
			s := text.String()
			i := strings.Index(s, "\n\n")
			if i < 0 {
				break
			}
			frame := s[:i]
			text.Reset()
			text.WriteString(s[i+2:])
			if data, ok := strings.CutPrefix(frame, "event: health\ndata: "); ok {
				var h healthBody
				require.NoError(t, json.Unmarshal([]byte(data), &h))
				if h.Backend.Available == want {
					return
				}
			}
		}
		if err == io.EOF || ctx.Err() != nil {
			t.Fatalf("the health stream ended without available=%v", want)
		}
		require.NoError(t, err)
	}
}

func submitRelay(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Post(base+"/v1/pairs", "application/yaml", strings.NewReader(serve.RelayYAML))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// streamed is what a pair's SSE stream carried until it closed.
type streamed struct {
	ids []int
	end bool
}

func readStream(r io.Reader) streamed {
	var s streamed
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			n, _ := strconv.Atoi(v)
			s.ids = append(s.ids, n)
		}
		if line == "event: end" {
			s.end = true
		}
	}
	return s
}

// TestD4_ServeSaysNATSIsDownAndRecovers: `serve --nats` whose NATS
// server stops, then starts again on the same storage and port. Serve
// logs the loss and the return once each; GET /v1/health says so (as
// JSON and pushed as events); a submission while down is a 503
// backend_unavailable at once, and one after the return succeeds; the
// page is still served meanwhile, and an event stream opened before
// stays open and carries the pair, gap-free, once a worker plays it.
func TestD4_ServeSaysNATSIsDownAndRecovers(t *testing.T) {
	n := startNATSServe(t)
	h := getHealth(t, n.url)
	require.True(t, h.Backend.Available)
	require.Equal(t, "NATS", h.Backend.Name)
	require.Equal(t, "connected", h.Backend.State)
	code, body := submitRelay(t, n.url)
	require.Equal(t, http.StatusCreated, code, body)
	var first struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &first))
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer scancel()
	req, err := http.NewRequestWithContext(sctx, "GET", n.url+"/v1/pairs/"+first.ID+"/events", nil)
	require.NoError(t, err)
	stream, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, http.StatusOK, stream.StatusCode)
	carried := make(chan streamed, 1)
	go func() { carried <- readStream(stream.Body) }()

	n.stopNATS()
	awaitHealth(t, n.url, false)
	n.stderr.await(t, `msg="NATS connection lost; reconnecting" cmd=serve url=nats://127.0.0.1:`+strconv.Itoa(n.port))
	h = getHealth(t, n.url)
	require.False(t, h.Backend.Available)
	require.Equal(t, "reconnecting", h.Backend.State)
	started := time.Now()
	code, body = submitRelay(t, n.url)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, `"code":"backend_unavailable"`)
	require.Less(t, time.Since(started), 5*time.Second, "a submission while down is answered at once")
	resp, err := http.Get(n.url + "/v1/pairs")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	resp, err = http.Get(n.url + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the page is served while NATS is down")

	n.startNATS(t)
	awaitHealth(t, n.url, true)
	n.stderr.await(t, `msg="NATS connection restored" cmd=serve`)
	code, body = submitRelay(t, n.url)
	require.Equal(t, http.StatusCreated, code, body)
	require.Equal(t, 1, strings.Count(n.stderr.String(), "NATS connection lost"), n.stderr.String())
	require.Equal(t, 1, strings.Count(n.stderr.String(), "NATS connection restored"), n.stderr.String())

	// A worker plays the pair queued before NATS stopped; the stream
	// opened then carries it.
	dir := t.TempDir()
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runWorker(wctx, Env{Stdout: &lines{grew: make(chan struct{}, 1)}, Stderr: &lines{grew: make(chan struct{}, 1)}, Getenv: func(string) string { return "" }},
			workerFlags{url: n.ns.ClientURL(), name: "spice", pairs: 2, store: filepath.Join(dir, "w.db"), dataDir: filepath.Join(dir, "w"), drain: 5 * time.Second}, nil)
	}()
	defer func() { stop(); require.NoError(t, <-done) }()
	select {
	case got := <-carried:
		require.True(t, got.end, "the stream ended without its end: %v", got.ids)
		require.NotEmpty(t, got.ids)
		for i, id := range got.ids {
			require.Equal(t, i+1, id, "gap-free, once each")
		}
	case <-sctx.Done():
		t.Fatal("the stream did not carry the pair to its end")
	}
}
