package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// modelServer is an OpenAI-compatible server that answers every request
// from the request alone, as a model at temperature 0 would, and counts
// the requests it got for each conversation. The writer writes two files
// a turn for four turns, the reviewer one file a turn for two.
type modelServer struct {
	srv *httptest.Server

	mu     sync.Mutex
	counts map[string]int    // conversation digest -> requests
	tags   map[string]string // conversation digest -> what it was answered
}

func newModelServer(t *testing.T) *modelServer {
	s := &modelServer{counts: map[string]int{}, tags: map[string]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *modelServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) < 2 {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	msgs, _ := json.Marshal(req.Messages)
	sum := sha256.Sum256(msgs)
	key := hex.EncodeToString(sum[:])
	worker, turns, perTurn := "reviewer", 2, 1
	if strings.Contains(string(req.Messages[0].Content), "WRITER") {
		worker, turns, perTurn = "writer", 4, 2
	}
	turn := 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			turn++
		}
	}
	var chunks []string
	var tag string
	// OpenAI tool names have no dots: the provider maps fs.write to fs_write.
	if turn < turns {
		for i := range perTurn {
			name := fmt.Sprintf("%s-%d-%d", worker, turn, i)
			tool, args := "fs_write", `{"path":"`+name+`.txt","content":"by `+name+`"}`
			if i == 1 {
				tool, args = "hold", `{"millis":3}`
				if worker == "writer" && turn == 0 {
					// Long enough that a kill sent on reading its
					// tool.started always lands while it runs.
					tool, args = "hold", `{"millis":`+strconv.Itoa(longHoldMillis)+`}`
				}
			}
			call := map[string]any{"index": i, "id": "call_" + strings.ReplaceAll(name, "-", "_"), "type": "function",
				"function": map[string]string{"name": tool, "arguments": args}}
			chunks = append(chunks, chunk(map[string]any{"role": "assistant", "tool_calls": []any{call}}, nil))
			if i == 0 {
				tag = "call:call_" + strings.ReplaceAll(name, "-", "_")
			}
		}
		chunks = append(chunks, chunk(map[string]any{}, "tool_calls"))
	} else {
		text := map[string]string{"writer": "Wrote eight files.", "reviewer": "Reviewed them."}[worker]
		tag = "text:" + text
		chunks = append(chunks, chunk(map[string]any{"role": "assistant", "content": text}, nil), chunk(map[string]any{}, "stop"))
	}
	s.mu.Lock()
	s.counts[key]++
	s.tags[key] = tag
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
	}
	fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`+"\n\ndata: [DONE]\n\n")
}

func chunk(delta map[string]any, finish any) string {
	b, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion.chunk",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
	return string(b)
}

// repeated returns the tags of the conversations requested more than once.
func (s *modelServer) repeated() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, n := range s.counts {
		if n > 1 {
			out[s.tags[k]] = n
		}
	}
	return out
}

// resumeSpec is a relay on modelServer whose writer calls fs.write
// (mutating, idempotent) and the fixture plugin's hold (mutating, unsafe).
func resumeSpec(t *testing.T, dir, baseURL, plugin, sum string) string {
	return writeSpec(t, dir, "resume.yaml", `pattern: relay
plugins:
  - path: `+plugin+`
    sha256: "`+sum+`"
    name: fixture
workers:
  - role: writer
    provider: openai
    model: m
    max_turns: 8
    system: WRITER
    openai: {base_url: "`+baseURL+`"}
  - role: reviewer
    provider: openai
    model: m
    max_turns: 4
    system: REVIEWER
    openai: {base_url: "`+baseURL+`"}
`)
}

// longHoldMillis is how long the writer's first hold runs.
const longHoldMillis = 400

var (
	acceptHint = regexp.MustCompile(`--accept-uncertain (\S+)`)
	showCall   = regexp.MustCompile(`(?m)^  \S+: (\S+) \(call (\S+), mutating\), started at run sequence \d+, no outcome recorded$`)
)

// SIGKILL at 30 random points of a pair with ten mutating calls, then
// `runs resume`: every pair ends with one terminal and a gap-free timeline
// that continues the recorded one, no model is asked again what the
// record answered, no file whose write has a recorded outcome is written
// again, and a pair with an uncertain call is refused, naming it, until
// --accept-uncertain.
func TestR3_RunsResumeAfterSIGKILLRepeatsNothingRecorded(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills 30 processes")
	}
	dir := t.TempDir()
	e := env(t, "OPENAI_API_KEY=sk-test")
	plugin, sum := buildPlugin(t, "plugins/fixtures/goplugin")
	whole := newModelServer(t)
	spec := resumeSpec(t, dir, whole.srv.URL+"/v1", plugin, sum)
	full := spiceOrch(t, e, "run", spec, "--json", "--store", filepath.Join(dir, "whole.db"), "--workspace", filepath.Join(dir, "ws-whole"))
	require.Equal(t, 0, full.code, full.stderr)
	lines := strings.Count(full.stdout, "\n")
	require.Greater(t, lines, 60)

	// The first kill lands inside the long hold, so that at least one
	// resume meets an uncertain call whatever the random points hit.
	inHold := 0
	for i, l := range timelineLines(t, full.stdout) {
		if l.Kind == "tool.started" && field[string](t, l.Relay.Payload, "name") == "hold" {
			inHold = i + 1
			break
		}
	}
	require.Positive(t, inHold, "the whole pair started no hold")

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d lines in a whole pair", seed, lines)
	rng := rand.New(rand.NewPCG(seed, 31))
	const wantKills = 30
	kills, refusals := 0, 0
	for attempt := 0; kills < wantKills; attempt++ {
		require.Less(t, attempt, 4*wantKills, "the kills keep missing the pair")
		srv := newModelServer(t)
		spec := resumeSpec(t, dir, srv.srv.URL+"/v1", plugin, sum)
		db := filepath.Join(dir, fmt.Sprintf("runs-%d.db", attempt))
		ws := filepath.Join(dir, fmt.Sprintf("ws-%d", attempt))
		k := 1 + rng.IntN(lines-1)
		if attempt == 0 {
			k = inHold
		}
		printed, killed := killedAfter(t, e, k, "run", spec, "--json", "--store", db, "--workspace", ws)
		if !killed {
			continue
		}
		pairID := field[string](t, timelineHead(t, string(printed)).Payload, "pair_id")
		before := spiceOrch(t, e, "runs", "replay", pairID, "--json", "--store", db)
		require.Equal(t, 0, before.code, before.stderr)
		if strings.Contains(before.stdout, `"kind":"pair.completed"`) {
			continue // killed after its terminal was recorded
		}
		kills++
		recorded := timelineLines(t, before.stdout)
		show := spiceOrch(t, e, "runs", "show", pairID, "--store", db)
		require.Equal(t, 0, show.code, show.stderr)
		var uncertain []string
		for _, m := range showCall.FindAllStringSubmatch(show.stdout, -1) {
			// fs.write is idempotent: it runs again without asking.
			if m[1] != "fs.write" {
				uncertain = append(uncertain, m[2])
			}
		}
		sort.Strings(uncertain)
		// What a write with a recorded outcome left, to compare after.
		written := map[string]time.Time{}
		for _, l := range recorded {
			if l.Kind == "tool.completed" && field[string](t, l.Relay.Payload, "name") == "fs.write" {
				var p struct{ Content string }
				require.NoError(t, json.Unmarshal(l.Relay.Payload, &p))
				var c struct{ Path string }
				require.NoError(t, json.Unmarshal([]byte(p.Content), &c))
				fi, err := os.Stat(filepath.Join(ws, c.Path))
				require.NoError(t, err)
				written[c.Path] = fi.ModTime()
			}
		}

		var accepted []string
		args := []string{"runs", "resume", pairID, "--store", db, "--json"}
		var r result
		for {
			r = spiceOrch(t, e, args...)
			m := acceptHint.FindStringSubmatch(r.stderr)
			if r.code == 0 || m == nil {
				break
			}
			require.Equal(t, 1, r.code, r.stderr)
			require.Contains(t, r.stderr, "uncertain_tool_call")
			require.NotContains(t, accepted, m[1])
			accepted = append(accepted, m[1])
			refusals++
			args = append(args, "--accept-uncertain", m[1])
		}
		require.Equal(t, 0, r.code, "kill %d: %s", kills, r.stderr)
		if attempt == 0 {
			require.NotEmpty(t, accepted, "the kill inside the hold left no uncertain call")
		}
		sort.Strings(accepted)
		require.Equal(t, uncertain, accepted, "every uncertain call refused the resume, and nothing else did")

		after := spiceOrch(t, e, "runs", "replay", pairID, "--json", "--store", db)
		require.Equal(t, 0, after.code, after.stderr)
		require.True(t, strings.HasPrefix(after.stdout, before.stdout), "the record is kept as it was")
		require.Equal(t, after.stdout[len(before.stdout):], r.stdout, "resume printed what it recorded")
		all := timelineLines(t, after.stdout)
		terminals := 0
		for i, l := range all {
			require.Equal(t, uint64(i+1), l.Seq)
			if strings.HasPrefix(l.Kind, "pair.") && (l.Kind == "pair.completed" || l.Kind == "pair.failed" || l.Kind == "pair.cancelled") {
				terminals++
			}
		}
		require.Equal(t, 1, terminals)
		require.Equal(t, "pair.completed", all[len(all)-1].Kind)
		resumed := all[len(recorded)]
		require.Equal(t, "pair.resumed", resumed.Kind)
		require.Equal(t, uint64(len(recorded)), field[uint64](t, resumed.Payload, "from_seq"))

		// No conversation the record answered was sent again.
		journaled := map[string]bool{}
		for _, l := range recorded {
			if l.Kind != "pair.model_output" {
				continue
			}
			var mo struct {
				Text  string `json:"text"`
				Calls map[string]struct {
					ID string `json:"id"`
				} `json:"calls"` // by position
			}
			require.NoError(t, json.Unmarshal(l.Payload, &mo))
			if len(mo.Calls) > 0 {
				journaled["call:"+mo.Calls["0"].ID] = true
			} else {
				journaled["text:"+mo.Text] = true
			}
		}
		for tag, n := range srv.repeated() {
			require.Equal(t, 2, n, tag)
			require.False(t, journaled[tag], "kill %d: %s was answered and recorded, and asked again", kills, tag)
		}
		// No write with a recorded outcome ran again.
		for path, mtime := range written {
			fi, err := os.Stat(filepath.Join(ws, path))
			require.NoError(t, err)
			require.Equal(t, mtime, fi.ModTime(), "kill %d: %s was written again", kills, path)
		}
		// And the pair did all its work.
		for _, name := range []string{"writer-3-0", "reviewer-1-0"} {
			_, err := os.Stat(filepath.Join(ws, name+".txt"))
			require.NoError(t, err)
		}
	}
	t.Logf("%d kills, %d refusals for uncertain calls", kills, refusals)
	require.Positive(t, refusals, "no kill left an uncertain call: the test proves nothing of R4 (seed %d)", seed)
}

// A plugin binary that no longer has the digest its pair ran refuses the
// resume with plugin_digest_changed, and nothing is recorded; re-pinning
// the spec to the new build is a changed spec, refused as well.
func TestR3_ResumeWithAChangedPluginDigestFailsClosed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := env(t, "OPENAI_API_KEY=sk-test")
	plugin, sum := buildPlugin(t, "plugins/fixtures/goplugin")
	srv := newModelServer(t)
	spec := resumeSpec(t, dir, srv.srv.URL+"/v1", plugin, sum)
	db, ws := filepath.Join(dir, "runs.db"), filepath.Join(dir, "ws")
	printed, killed := killedAfter(t, e, 12, "run", spec, "--json", "--store", db, "--workspace", ws)
	require.True(t, killed)
	pairID := field[string](t, timelineHead(t, string(printed)).Payload, "pair_id")
	before := spiceOrch(t, e, "runs", "replay", pairID, "--json", "--store", db)
	require.Equal(t, 0, before.code, before.stderr)
	require.NotContains(t, before.stdout, `"kind":"pair.completed"`)

	// Another build at the same path.
	goTool, err := exec.LookPath("go")
	require.NoError(t, err)
	out, err := exec.Command(goTool, "build", "-o", plugin, "-ldflags", "-X main.version=9.9.9", "../../plugins/fixtures/goplugin").CombinedOutput()
	require.NoError(t, err, string(out))
	r := spiceOrch(t, e, "runs", "resume", pairID, "--store", db)
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "resume refused: plugin_digest_changed")
	after := spiceOrch(t, e, "runs", "replay", pairID, "--json", "--store", db)
	require.Equal(t, before.stdout, after.stdout, "a refusal records nothing")

	d := spiceOrch(t, e, "plugin", "digest", plugin)
	require.Equal(t, 0, d.code, d.stderr)
	b, err := os.ReadFile(spec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(spec, []byte(strings.ReplaceAll(string(b), sum, strings.TrimSpace(d.stdout))), 0o600))
	r = spiceOrch(t, e, "runs", "resume", pairID, "--store", db)
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "resume refused: spec_changed")
	after = spiceOrch(t, e, "runs", "replay", pairID, "--json", "--store", db)
	require.Equal(t, before.stdout, after.stdout)
}

// Of two resumes of one pair at once, one plays it: the other is refused
// while the first lives, and the pair shows running meanwhile.
func TestR3_TwoResumesAtOnceOnePlays(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := env(t)
	db, ws := filepath.Join(dir, "runs.db"), filepath.Join(dir, "ws")
	printed, killed := killedAfter(t, e, 8, "run", "--json", "--store", db, "--workspace", ws)
	require.True(t, killed)
	pairID := field[string](t, timelineHead(t, string(printed)).Payload, "pair_id")

	var second, list result
	wait := started(t, append(e, "SPICE_ORCH_PAUSE_AFTER=pair.resumed"), func(cmd *exec.Cmd, line string) {
		if strings.Contains(line, "holding the pair") {
			second = spiceOrch(t, e, "runs", "resume", pairID, "--store", db)
			list = spiceOrch(t, e, "runs", "list", "--store", db)
			require.NoError(t, cmd.Process.Signal(os.Interrupt))
		}
	}, "runs", "resume", pairID, "--store", db, "--json")
	first := wait()
	require.Equal(t, 1, second.code, second.stderr)
	require.Regexp(t, `is running: only an interrupted pair resumes|is being played by another process`, second.stderr)
	require.Contains(t, list.stdout, pairID+"  running")
	require.Equal(t, 130, first.code, first.stderr)
	ls := timelineLines(t, first.stdout)
	require.Equal(t, "pair.resumed", ls[0].Kind)
	require.Equal(t, "pair.cancelled", ls[len(ls)-1].Kind)
}
