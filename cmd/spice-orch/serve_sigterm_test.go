//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/store"
)

const scriptedReview = "version: 1\npattern: review\napprove: never\nworkers:\n  - role: writer\n    provider: scripted\n  - role: reviewer\n    provider: scripted\n"

// serveChild is a running `serve` child process.
type serveChild struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	copied chan struct{}
}

func startServe(t *testing.T, ctx context.Context, args ...string) *serveChild {
	t.Helper()
	return startServeEnv(t, ctx, env(t), args...)
}

// startServeEnv is startServe with the child's environment.
func startServeEnv(t *testing.T, ctx context.Context, environ []string, args ...string) *serveChild {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--demo=false"}, args...)...)
	cmd.Env = environ
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	c := &serveChild{cmd: cmd, stderr: &syncBuffer{}, copied: make(chan struct{})}
	cmd.Stderr = c.stderr
	require.NoError(t, cmd.Start())
	br := bufio.NewReader(out)
	first, err := br.ReadString('\n')
	require.NoError(t, err, c.stderr.String())
	go func() { defer close(c.copied); _, _ = io.Copy(io.Discard, br) }()
	f := strings.Fields(first)
	require.GreaterOrEqual(t, len(f), 3, first)
	c.url = f[2]
	return c
}

func (c *serveChild) post(t *testing.T, spec string) string {
	t.Helper()
	resp, err := http.Post(c.url+"/v1/pairs", "application/yaml", strings.NewReader(spec))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(b))
	var v struct{ ID string }
	require.NoError(t, json.Unmarshal(b, &v))
	return v.ID
}

// frame is one SSE frame: a timeline event (kind set) or a named event.
type frame struct {
	event, kind, data string
}

// readFrames reads an SSE body to its end, telling started after the
// first n timeline events.
func readFrames(body io.Reader, n int, started func()) []frame {
	var out []frame
	var cur frame
	events := 0
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "" && cur != (frame{}):
			out = append(out, cur)
			if cur.event == "" {
				if events++; events == n {
					started()
				}
			}
			cur = frame{}
		case strings.HasPrefix(l, "event: "):
			cur.event = l[7:]
		case strings.HasPrefix(l, "data: "):
			cur.data = l[6:]
			var v struct{ Kind string }
			if json.Unmarshal([]byte(cur.data), &v) == nil {
				cur.kind = v.Kind
			}
		}
	}
	if events < n {
		started()
	}
	return out
}

func terminalKind(kind string) bool {
	return kind == "pair.completed" || kind == "pair.failed" || kind == "pair.cancelled"
}

// TestS1_SIGTERMEndsEveryStreamAfterItsPairsTerminal: a serve process
// SIGTERMed while clients stream a running pair and queued ones ends every
// stream with the pair's terminal and then `end` in the terminal's state —
// never `end` while the pair runs — and records every pair it accepted,
// the queued ones ending with pair.cancelled.
func TestS1_SIGTERMEndsEveryStreamAfterItsPairsTerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	// Paced, so the running pair is in the middle of its runs at SIGTERM.
	c := startServe(t, ctx, "--pairs", "1", "--queue", "16", "--pace", "40ms", "--store", db)
	running := c.post(t, scriptedReview)
	var queued []string
	for range 4 {
		queued = append(queued, c.post(t, scriptedReview))
	}

	type stream struct {
		pair   string
		frames []frame
	}
	var streams []*stream
	for range 12 {
		streams = append(streams, &stream{pair: running})
	}
	for _, id := range queued {
		streams = append(streams, &stream{pair: id})
	}
	var wg, reading sync.WaitGroup
	for _, s := range streams {
		resp, err := http.Get(c.url + "/v1/pairs/" + s.pair + "/events")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		wg.Add(1)
		reading.Add(1)
		n := 3
		if s.pair != running {
			n = 0 // nothing comes before SIGTERM
		}
		var once sync.Once
		go func() {
			defer wg.Done()
			defer resp.Body.Close()
			s.frames = readFrames(resp.Body, n, func() { once.Do(reading.Done) })
		}()
		if n == 0 {
			once.Do(reading.Done)
		}
	}
	reading.Wait()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	wg.Wait()
	<-c.copied
	require.NoError(t, c.cmd.Wait(), c.stderr.String())

	for i, s := range streams {
		require.NotEmpty(t, s.frames, "stream %d", i)
		last := s.frames[len(s.frames)-1]
		require.Equal(t, "end", last.event, "stream %d of %s ends with end", i, s.pair)
		require.NotContains(t, last.data, `"state":"running"`)
		require.GreaterOrEqual(t, len(s.frames), 2)
		term := s.frames[len(s.frames)-2]
		require.True(t, terminalKind(term.kind), "stream %d: end follows the terminal, not %q", i, term.kind)
		require.Contains(t, last.data, `"state":"`+strings.TrimPrefix(term.kind, "pair.")+`"`)
	}

	st, err := store.OpenConfig(context.Background(), store.Config{Path: db, ReadOnly: true})
	require.NoError(t, err)
	defer st.Close()
	for _, id := range append([]string{running}, queued...) {
		var b strings.Builder
		require.NoError(t, st.ReplayJSON(context.Background(), &b, id), id)
		ls := timeline(t, b.String())
		if id != running {
			require.Equal(t, "pair.cancelled", ls[len(ls)-1].Kind, id)
		}
	}
}

// TestS1_PairsAcceptedBeforeASIGKILLAreRecordedByTheNextServe: a 201 is
// durable. Pairs a serve process accepted and had not started when it was
// SIGKILLed are in the store once the next serve on the same store and
// data directory starts: cancelled, their timelines ending with
// pair.cancelled, and served as such.
func TestS1_PairsAcceptedBeforeASIGKILLAreRecordedByTheNextServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--pairs", "1", "--queue", "16", "--store", filepath.Join(dir, "runs.db"), "--data-dir", filepath.Join(dir, "data")}
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	// Paced slowly: the first pair holds the only slot until the kill.
	c := startServe(t, ctx, append([]string{"--pace", "10s"}, args...)...)
	running := c.post(t, scriptedReview)
	var queued []string
	for range 3 {
		queued = append(queued, c.post(t, scriptedReview))
	}
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	<-c.copied
	require.Error(t, c.cmd.Wait())

	c = startServe(t, ctx, append([]string{"--pace", "0"}, args...)...)
	for _, id := range queued {
		resp, err := http.Get(c.url + "/v1/pairs/" + id)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s\n%s", id, b, c.stderr.String())
		require.Contains(t, string(b), `"state":"cancelled"`)
		resp, err = http.Get(c.url + "/v1/pairs/" + id + "/events.jsonl")
		require.NoError(t, err)
		b, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		ls := timeline(t, string(b))
		require.Equal(t, "pair.started", ls[0].Kind)
		require.Equal(t, "pair.cancelled", ls[len(ls)-1].Kind)
	}
	resp, err := http.Get(c.url + "/v1/pairs/" + running)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(b), `"state":"interrupted"`, "the pair that was running is the store's to report")
	require.Contains(t, c.stderr.String(), "3 pairs accepted before the last stop never started")
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	<-c.copied
	require.NoError(t, c.cmd.Wait(), c.stderr.String())
}
