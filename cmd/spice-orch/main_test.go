package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// bin is the spice-orch binary, built once for the package: these tests
// run the real command as a child process.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "spice-orch-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "spice-orch")
	// go test puts its own toolchain first on PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	build := exec.Command(goTool, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building spice-orch: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// childTimeout bounds every child process, so a hang fails the test.
const childTimeout = 2 * time.Minute

type result struct {
	stdout, stderr string
	code           int
}

// env is a clean environment for a child: a private home and state
// directory (the default store lands there), no colors, and no OpenAI or
// spice-orch variables from the outside.
func env(t *testing.T, extra ...string) []string {
	t.Helper()
	home := t.TempDir()
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME", k == "XDG_STATE_HOME", k == "NO_COLOR", strings.HasPrefix(k, "OPENAI_"), strings.HasPrefix(k, "SPICE_ORCH_"):
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"), "NO_COLOR=1")
	return append(out, extra...)
}

// homeOf returns the HOME an env gave the child.
func homeOf(environ []string) string {
	home := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	return home
}

// spiceOrch runs the binary to its end.
func spiceOrch(t *testing.T, environ []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = environ
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// line is one timeline JSON line; Relay is its payload when it is a
// relayed run event.
type line struct {
	Seq     uint64          `json:"seq"`
	Kind    string          `json:"kind"`
	Time    string          `json:"time"`
	Payload json.RawMessage `json:"payload"`
	Relay   relayed         `json:"-"`
}

type relayed struct {
	Worker  string          `json:"worker"`
	RunID   string          `json:"run_id"`
	RunSeq  uint64          `json:"run_seq"`
	Payload json.RawMessage `json:"payload"`
}

// timelineLines parses JSON lines.
func timelineLines(t *testing.T, out string) []line {
	t.Helper()
	var ls []line
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var l line
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), sc.Text())
		if !strings.HasPrefix(l.Kind, "pair.") {
			require.NoError(t, json.Unmarshal(l.Payload, &l.Relay))
			require.NotEmpty(t, l.Relay.Worker)
			require.NotEmpty(t, l.Relay.RunID)
			require.NotZero(t, l.Relay.RunSeq)
		}
		ls = append(ls, l)
	}
	require.NoError(t, sc.Err())
	return ls
}

// timeline parses JSON lines and checks what every timeline must hold:
// sequences 1..N without a gap, and exactly one pair terminal, last.
func timeline(t *testing.T, out string) []line {
	t.Helper()
	ls := timelineLines(t, out)
	require.NotEmpty(t, ls)
	terminals := 0
	for i, l := range ls {
		require.Equal(t, uint64(i+1), l.Seq, "sequence without gaps")
		switch l.Kind {
		case "pair.completed", "pair.failed", "pair.cancelled":
			terminals++
		}
	}
	require.Equal(t, 1, terminals, "exactly one pair terminal")
	require.Contains(t, []string{"pair.completed", "pair.failed", "pair.cancelled"}, ls[len(ls)-1].Kind)
	return ls
}

func field[T any](t *testing.T, raw json.RawMessage, name string) T {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	var v T
	if f, ok := m[name]; ok {
		require.NoError(t, json.Unmarshal(f, &v))
	}
	return v
}

// started runs the binary in the background, hands its stderr lines to
// onStderr as they come, and returns a function that waits for the end.
func started(t *testing.T, environ []string, onStderr func(cmd *exec.Cmd, line string), args ...string) func() result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = environ
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var stderr strings.Builder
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		onStderr(cmd, sc.Text())
	}
	_, _ = io.Copy(io.Discard, errPipe)
	return func() result {
		defer cancel()
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode() // -1 when a signal killed it
		} else {
			require.NoError(t, err)
		}
		return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
	}
}
