//go:build unix

package cli

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/serve"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/store"
)

// storeGate holds one pair timeline event before the store records it.
type storeGate struct {
	next    eventlog.Observer
	seq     uint64
	reached chan struct{}
	release chan struct{}
}

func (g *storeGate) Observe(ctx context.Context, e eventlog.Event) error {
	if strings.HasPrefix(e.Log(), "pair-") && !strings.Contains(e.Log(), "/") && e.Seq() == g.seq {
		close(g.reached)
		select {
		case <-g.release:
		case <-time.After(time.Minute):
		}
	}
	return g.next.Observe(ctx, e)
}

func post(t *testing.T, url, ctype, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/pairs", ctype, strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestS1_ServeStreamsOnlyDurableEvents: while the store has not yet
// recorded event k of a pair, no client has seen it — the feed stops at
// k-1 — and once it has, the stream goes on to the terminal, byte for
// byte what the store replays (what `run --json` prints).
func TestS1_ServeStreamsOnlyDurableEvents(t *testing.T) {
	const k = 30
	g := &storeGate{seq: k, reached: make(chan struct{}), release: make(chan struct{})}
	ts := startTestServerHooks(t, func(st eventlog.Observer) eventlog.Observer { g.next = st; return g })
	defer func() {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
	}()
	status, body := post(t, ts.url, "application/yaml", serve.BuiltinYAML())
	require.Equal(t, http.StatusCreated, status, body)
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	<-g.reached

	resp, err := http.Get(ts.url + "/v1/pairs/" + created.ID + "/events")
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var got []string
	readUntil := func(stop func(id string) bool) {
		for {
			l, err := br.ReadString('\n')
			require.NoError(t, err)
			if v, ok := strings.CutPrefix(l, "data: "); ok && strings.HasPrefix(v, `{"seq"`) {
				got = append(got, strings.TrimSuffix(v, "\n"))
			}
			if v, ok := strings.CutPrefix(l, "id: "); ok && stop(strings.TrimSpace(v)) {
				l, err = br.ReadString('\n')
				require.NoError(t, err)
				got = append(got, strings.TrimSuffix(strings.TrimPrefix(l, "data: "), "\n"))
				return
			}
			if strings.HasPrefix(l, "event: end") {
				return
			}
		}
	}
	readUntil(func(id string) bool { return id == strconv.Itoa(k-1) })
	require.Len(t, got, k-1)
	r, err := http.Get(ts.url + "/v1/pairs/" + created.ID)
	require.NoError(t, err)
	var v struct {
		LastSeq uint64 `json:"last_seq"`
	}
	require.NoError(t, json.NewDecoder(r.Body).Decode(&v))
	r.Body.Close()
	require.Equal(t, uint64(k-1), v.LastSeq, "the feed holds nothing the store has not recorded")

	close(g.release)
	readUntil(func(string) bool { return false })
	st, err := store.OpenConfig(context.Background(), store.Config{Path: filepath.Join(ts.dir, "runs.db"), ReadOnly: true})
	require.NoError(t, err)
	defer st.Close()
	var replay strings.Builder
	require.NoError(t, st.ReplayJSON(context.Background(), &replay, created.ID))
	require.Equal(t, strings.Split(strings.TrimSuffix(replay.String(), "\n"), "\n"), got)
	require.Contains(t, got[len(got)-1], `"kind":"pair.completed"`)
}

// TestS2_ServeRefusesSpecsThatChooseServerResources: a spec over HTTP that
// names a workspace, an openai worker (not allowed here) or a base_url is
// a 400 naming the field and its line; a bad spec gives its FILE:LINE;
// nothing is written outside the data directory.
func TestS2_ServeRefusesSpecsThatChooseServerResources(t *testing.T) {
	ts := startTestServer(t)
	outside := t.TempDir()
	// An executable a client could name as a plugin; it leaves a mark if run.
	bin := t.TempDir()
	mark := filepath.Join(bin, "ran")
	exe := filepath.Join(bin, "plugin")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o700))
	sum := sha256.Sum256([]byte("#!/bin/sh\ntouch " + mark + "\n"))
	cases := map[string]struct{ spec, field, msg string }{
		"plugins": {"version: 1\npattern: relay\nplugins:\n  - path: " + exe + "\n    sha256: " + hex.EncodeToString(sum[:]) + "\nworkers:\n  - role: writer\n    provider: scripted\n  - role: reviewer\n    provider: scripted\n",
			"plugins", "request.yaml:3: plugins: a spec sent over HTTP may not launch plugins"},
		"mcp_servers": {"version: 1\npattern: relay\nmcp_servers:\n  - name: x\n    path: " + exe + "\n    sha256: " + hex.EncodeToString(sum[:]) + "\nworkers:\n  - role: writer\n    provider: scripted\n  - role: reviewer\n    provider: scripted\n",
			"mcp_servers", "request.yaml:3: mcp_servers: a spec sent over HTTP may not name MCP servers"},
		"mcp url": {"version: 1\npattern: relay\nmcp_servers:\n  - name: x\n    url: http://127.0.0.1:1/mcp\nworkers:\n  - role: writer\n    provider: scripted\n  - role: reviewer\n    provider: scripted\n",
			"mcp_servers", "request.yaml:3: mcp_servers: a spec sent over HTTP may not name MCP servers"},
		"workspace": {"version: 1\npattern: relay\nworkspace: " + outside + "\nworkers:\n  - role: writer\n    provider: scripted\n  - role: reviewer\n    provider: scripted\n",
			"workspace", "request.yaml:3: workspace: must be a relative path inside the spec's folder"},
		"relative workspace": {"version: 1\npattern: relay\nworkspace: ws\nworkers:\n  - role: writer\n    provider: scripted\n  - role: reviewer\n    provider: scripted\n",
			"workspace", "request.yaml:3: workspace: a spec sent over HTTP may not name a workspace"},
		"openai": {"version: 1\npattern: relay\nworkers:\n  - role: writer\n    provider: openai\n    model: gpt-4o-mini\n  - role: reviewer\n    provider: scripted\n",
			"workers[0].provider", "workers[0].provider: this server does not allow provider openai"},
		"bad spec": {"version: 1\npattern: relay\nworkers:\n  - role: writer\n    provider: scripted\n    max_turns: 999\n  - role: reviewer\n    provider: scripted\n",
			"workers[0].max_turns", "request.yaml:6: workers[0].max_turns: must be between 1 and 64"},
	}
	for name, c := range cases {
		status, body := post(t, ts.url, "application/yaml", c.spec)
		require.Equal(t, http.StatusBadRequest, status, name)
		var e struct {
			Error struct{ Code, Message, Field string }
		}
		require.NoError(t, json.Unmarshal([]byte(body), &e), body)
		require.Equal(t, "bad_spec", e.Error.Code, name)
		require.Equal(t, c.field, e.Error.Field, name)
		require.Contains(t, e.Error.Message, c.msg, name)
	}
	ents, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Empty(t, ents, "nothing written where the spec pointed")
	require.NoFileExists(t, mark, "the plugin a client named never ran")
	ws, err := os.ReadDir(filepath.Join(ts.dir, "data", "workspaces"))
	if !os.IsNotExist(err) {
		require.NoError(t, err)
		require.Empty(t, ws)
	}
	// An accepted pair writes only in its own workspace under the data dir.
	status, body := post(t, ts.url, "application/yaml", serve.BuiltinYAML())
	require.Equal(t, http.StatusCreated, status, body)
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	resp, err := http.Get(ts.url + "/v1/pairs/" + created.ID + "/events.jsonl")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var files []string
	require.NoError(t, filepath.WalkDir(ts.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(ts.dir, p)
			files = append(files, rel)
		}
		return err
	}))
	for _, f := range files {
		// The server keeps the pair's name and task in data/meta.
		ok := strings.HasPrefix(f, "runs.db") || strings.HasPrefix(f, filepath.Join("data", "workspaces", created.ID)+string(filepath.Separator)) ||
			f == filepath.Join("data", "meta", created.ID+".json")
		require.True(t, ok, "unexpected file %s", f)
	}
	require.True(t, slices.Contains(files, filepath.Join("data", "workspaces", created.ID, "draft.md")), files)
}
