//go:build unix

package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

var pythonSkipNotice sync.Once

// pythonPluginDir copies the Python fixture's packages and lock file into
// a folder of their own and returns it with the fixture's launcher, made
// by `make test` (make plugins-venv); without that venv it skips, saying
// so in one line.
func pythonPluginDir(t *testing.T) (dir, launcher string) {
	t.Helper()
	root, err := filepath.Abs("../../../..")
	require.NoError(t, err)
	launcher = filepath.Join(root, ".venv-plugins/bin/spice-plugin-fixture-python")
	if _, err := os.Stat(launcher); errors.Is(err, fs.ErrNotExist) {
		if os.Getenv("SPICE_REQUIRE_PYTHON_FIXTURE") == "1" {
			t.Fatal("the Python fixture's venv (.venv-plugins) is missing, and SPICE_REQUIRE_PYTHON_FIXTURE=1 requires it")
		}
		msg := "*** SKIPPING the Python `plugin dev` tests: the Python fixture's venv (.venv-plugins) is missing; `make test` builds it and runs them ***"
		pythonSkipNotice.Do(func() { fmt.Fprintln(os.Stderr, msg) })
		t.Skip(msg)
	}
	src := filepath.Join(root, "plugins/fixtures/python")
	dir = filepath.Join(t.TempDir(), "pyplug")
	for _, f := range []string{"gen", "spice_fixture"} {
		require.NoError(t, os.CopyFS(filepath.Join(dir, f), os.DirFS(filepath.Join(src, f))))
	}
	b, err := os.ReadFile(filepath.Join(src, "requirements.txt"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "requirements.txt"), b, 0o644))
	return dir, launcher
}

// echoPair is a relay whose writer calls the Python fixture's echo.
const echoPair = `version: 1
name: python-dev
pattern: relay
approve: never
plugins:
  - path: /placeholder/launcher
    sha256: "0000000000000000000000000000000000000000000000000000000000000000"
    root: /placeholder/root
    files: [gen, requirements.txt, spice_fixture]
workers:
  - role: writer
    provider: scripted
    script:
      - calls:
          - name: echo
            arguments: {text: "from the dev build"}
      - text: echoed
  - role: reviewer
    provider: scripted
    script:
      - text: ok
`

// TestL3_PluginDevBuildsAPythonPluginPlaysItAndNamesTheMistakesLine: `plugin
// dev --launcher` over a Python plugin's folder activates it, pins the
// build (launcher, root and files) into --run's spec and plays it, and a
// syntax error keeps that generation with the error's FILE:LINE.
func TestL3_PluginDevBuildsAPythonPluginPlaysItAndNamesTheMistakesLine(t *testing.T) {
	dir, launcher := pythonPluginDir(t)
	spec := filepath.Join(t.TempDir(), "python-pair.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(echoPair), 0o644))
	builds := filepath.Join(t.TempDir(), "builds")
	out := &lines{grew: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"plugin", "dev", "--launcher", launcher, "--out", builds, "--debounce", "50ms",
			"--run", spec, "--no-store", dir}, Env{Stdout: out, Stderr: out, Getenv: func(string) string { return "" }})
	}()
	defer func() {
		cancel()
		require.Equal(t, 0, <-done, out.String())
	}()

	out.await(t, "pyplug-c1: sha256 ")
	out.await(t, " active as spice-fixture-python-g1 (build ")
	out.await(t, "pair completed: ")
	pinned, err := os.ReadFile(spec)
	require.NoError(t, err)
	require.Contains(t, string(pinned), "path: "+builds+"/")
	require.Contains(t, string(pinned), "root: "+builds+"/")
	require.NotContains(t, string(pinned), "placeholder")

	b, err := os.ReadFile(filepath.Join(dir, "spice_fixture/tools.py"))
	require.NoError(t, err)
	bad := strings.Replace(string(b), "def echo(call: Call)", "def echo(call: Call", 1)
	require.NotEqual(t, string(b), bad)
	tmp := filepath.Join(dir, "spice_fixture", ".tools.py.tmp")
	require.NoError(t, os.WriteFile(tmp, []byte(bad), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "spice_fixture/tools.py")))
	out.await(t, "pyplug-c2 failed (build); spice-fixture-python-g1 stays active\nspice_fixture/tools.py:112: invalid syntax\n")
}

// echoOnServe is a relay whose writer calls echo; with approve: echo the
// call waits for an answer, which holds the pair.
func echoOnServe(approve string) string {
	return "version: 1\nname: echo-dev\npattern: relay\napprove: " + approve + `
workers:
  - role: writer
    provider: scripted
    script:
      - calls:
          - name: echo
            arguments: {text: "hello"}
      - text: echoed
  - role: reviewer
    provider: scripted
    script:
      - text: ok
`
}

// TestL4_PluginDevServeKeepsARunningPairsBuildAndGivesNewPairsTheNext:
// with --serve, a pair that started on one build (held by an approval
// question) plays on it to its end although a new build was activated
// meanwhile, and a pair started after the activation plays the new one.
func TestL4_PluginDevServeKeepsARunningPairsBuildAndGivesNewPairsTheNext(t *testing.T) {
	dir, launcher := pythonPluginDir(t)
	tmp := t.TempDir()
	out := &lines{grew: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"plugin", "dev", "--launcher", launcher, "--out", filepath.Join(tmp, "builds"), "--debounce", "50ms",
			"--serve", "127.0.0.1:0", "--store", filepath.Join(tmp, "runs.db"), dir},
			Env{Stdout: out, Stderr: out, Getenv: func(string) string { return "" }})
	}()
	defer func() {
		cancel()
		require.Equal(t, 0, <-done, out.String())
	}()
	out.await(t, " active as spice-fixture-python-g1 (build ")
	out.await(t, "spice-orch serve: http://")
	url := out.String()
	url = url[strings.Index(url, "spice-orch serve: http://")+len("spice-orch serve: "):]
	url = url[:strings.IndexAny(url, " \n")]

	// The held pair: its echo waits for an answer.
	status, body := post(t, url, "application/yaml", echoOnServe("echo"))
	require.Equal(t, http.StatusCreated, status, body)
	var held struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &held))
	resp, err := http.Get(url + "/v1/pairs/" + held.ID + "/events.jsonl")
	require.NoError(t, err)
	defer resp.Body.Close()
	timeline := bufio.NewReader(resp.Body)
	for {
		line, err := timeline.ReadString('\n')
		require.NoError(t, err, "the timeline ended before the question")
		if strings.Contains(line, `"interaction.started"`) {
			break
		}
	}

	// The next build's echo says so.
	b, err := os.ReadFile(filepath.Join(dir, "spice_fixture/tools.py"))
	require.NoError(t, err)
	next := strings.Replace(string(b), "    yield result(call, text)\n\n\ndef progress_tool", "    yield result(call, \"v2: \" + text)\n\n\ndef progress_tool", 1)
	require.NotEqual(t, string(b), next)
	tmpFile := filepath.Join(dir, "spice_fixture", ".tools.py.tmp")
	require.NoError(t, os.WriteFile(tmpFile, []byte(next), 0o644))
	require.NoError(t, os.Rename(tmpFile, filepath.Join(dir, "spice_fixture/tools.py")))
	out.await(t, " active as spice-fixture-python-g2 (build ")

	// Answer the held pair's question: its echo runs on its own build.
	status, body = httpDo(t, "GET", url+"/v1/pairs/"+held.ID+"/approvals", "", "")
	require.Equal(t, http.StatusOK, status, body)
	var list struct {
		Approvals []struct{ Question, Digest string }
	}
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list.Approvals, 1, body)
	q := list.Approvals[0]
	status, body = httpDo(t, "POST", url+"/v1/pairs/"+held.ID+"/approvals/"+q.Question, "application/json", answerJSON("approve", q.Digest))
	require.Equal(t, http.StatusOK, status, body)
	rest, err := io.ReadAll(timeline)
	require.NoError(t, err)
	require.Contains(t, string(rest), `"pair.completed"`)
	require.Equal(t, "hello", echoed(t, string(rest)), "the held pair keeps the build it started with")

	// A pair started now plays the new build.
	status, body = post(t, url, "application/yaml", echoOnServe("never"))
	require.Equal(t, http.StatusCreated, status, body)
	var fresh struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &fresh))
	_, all := httpDo(t, "GET", url+"/v1/pairs/"+fresh.ID+"/events.jsonl", "", "")
	require.Equal(t, "v2: hello", echoed(t, all))
}

// echoed is the content of the first tool.completed of a JSON lines
// timeline.
func echoed(t *testing.T, timeline string) string {
	t.Helper()
	for _, line := range strings.Split(timeline, "\n") {
		var e struct {
			Payload struct {
				Payload struct {
					Name    string `json:"name"`
					Content string `json:"content"`
				} `json:"payload"`
			} `json:"payload"`
		}
		if strings.Contains(line, `"tool.completed"`) {
			require.NoError(t, json.Unmarshal([]byte(line), &e))
			require.Equal(t, "echo", e.Payload.Payload.Name)
			return e.Payload.Payload.Content
		}
	}
	t.Fatalf("no tool.completed in:\n%s", timeline)
	return ""
}
