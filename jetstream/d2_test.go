package jetstream

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// loopback is the test's end of the pair workers' model and tool: it
// counts every model request by its content and every tool call by its
// ID, and holds the first call of hold until the caller goes away.
type loopback struct {
	srv     *httptest.Server
	hold    string
	started chan struct{} // closed when the held call arrives

	mu     sync.Mutex
	models map[string]int
	tools  map[string]int
	held   bool
	// freeze names a worker process whose tool calls are all held, each
	// sent to frozen as it arrives.
	freeze string
	frozen chan string
	// gated is how many of the next tool calls wait until gate is
	// closed, each sent to frozen as it arrives.
	gated int
	gate  chan struct{}
}

func newLoopback(t *testing.T, hold string) *loopback {
	l := &loopback{hold: hold, started: make(chan struct{}), models: map[string]int{}, tools: map[string]int{}, frozen: make(chan string, 64),
		gate: make(chan struct{})}
	l.srv = httptest.NewServer(http.HandlerFunc(l.serve))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *loopback) serve(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 4096))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := string(b)
	l.mu.Lock()
	hold, frozen := false, false
	switch r.URL.Path {
	case "/model":
		l.models[key]++
	case "/tool":
		l.tools[key]++
		hold = key == l.hold && !l.held
		l.held = l.held || hold
		frozen = l.freeze != "" && r.Header.Get(workerHeader) == l.freeze
		if !frozen && l.gated > 0 {
			l.gated--
			gate := l.gate
			l.mu.Unlock()
			l.frozen <- key
			select {
			case <-gate:
				w.WriteHeader(http.StatusOK)
			case <-r.Context().Done():
			}
			return
		}
	}
	l.mu.Unlock()
	if frozen {
		l.frozen <- key
		<-r.Context().Done()
		return
	}
	if hold {
		// The call has started and never ends: the worker is killed.
		close(l.started)
		<-r.Context().Done()
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (l *loopback) counts() (models, tools map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	models, tools = map[string]int{}, map[string]int{}
	for k, v := range l.models {
		models[k] = v
	}
	for k, v := range l.tools {
		tools[k] = v
	}
	return models, tools
}

// startPairWorker re-executes the test binary as a worker process that
// plays pairs recording into the store at path.
func startPairWorker(t *testing.T, url, name, path string, l *loopback, replay string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envURL+"="+url, envName+"="+name, envStore+"="+path, envLoop+"="+l.srv.URL, envReplay+"="+replay)
	cmd.Env = append(cmd.Env, env...)
	if os.Getenv(envNoResume) != "" {
		cmd.Env = append(cmd.Env, envNoResume+"=1")
	}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		requireGone(t, cmd.Process.Pid)
	})
	return cmd
}

// killDuringCall plays one pair job on a worker process, SIGKILLs it
// while the reviewer's write (the second run's call) is in progress,
// and starts a second worker process on the same store, to which the job
// is delivered again. It returns the job's terminal status.
func killDuringCall(t *testing.T, replay string) (job.Status, *loopback, string) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	name := "d2" + replay
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), name))
	require.NoError(t, err)
	tm := watchTerminals(t, b)
	path := filepath.Join(t.TempDir(), "spice.db")
	l := newLoopback(t, "pair-d2/c-reviewer")

	const jobID = "pair-d2"
	_, err = b.Submit(ctx, job.Job{ID: jobID, Spec: []byte("Write a line about the sea.")})
	require.NoError(t, err)
	a := startPairWorker(t, s.ClientURL(), name, path, l, replay)
	select {
	case <-l.started:
	case <-ctx.Done():
		st, _ := b.Status(context.Background(), jobID)
		t.Fatalf("the reviewer's write never started: %+v", st)
	}
	require.NoError(t, a.Process.Signal(syscall.SIGKILL))
	_ = a.Wait()
	requireGone(t, a.Process.Pid)

	startPairWorker(t, s.ClientURL(), name, path, l, replay)
	st, err := b.Await(ctx, jobID)
	require.NoError(t, err)
	require.Equal(t, 2, st.Attempt)
	tm.caughtUp(t, ctx)
	tm.mu.Lock()
	require.Equal(t, 1, tm.count[jobID], "terminal statuses")
	tm.mu.Unlock()
	return st, l, path
}

// TestD2_RedeliveredPairResumesOnAnotherWorker: a worker process is
// SIGKILLed during the second run's call to an idempotent tool; the job
// is delivered to another worker process sharing its store, which
// resumes the pair: the first run is not played again, no model request
// with a recorded answer is sent again, the idempotent call runs again,
// and the pair completes with one terminal and a timeline that continues
// the recorded sequence without a gap.
func TestD2_RedeliveredPairResumesOnAnotherWorker(t *testing.T) {
	st, l, path := killDuringCall(t, "idempotent")
	require.Equal(t, job.Completed, st.State, "%s: %s", st.Reason, st.Error)

	models, tools := l.counts()
	for key, n := range models {
		require.Equal(t, 1, n, "model request %s was sent again", key)
	}
	require.Len(t, models, 4, "two requests a worker")
	require.Equal(t, map[string]int{"pair-d2/c-writer": 1, "pair-d2/c-reviewer": 2}, tools)

	rd, err := store.OpenConfig(context.Background(), store.Config{Path: path, ReadOnly: true})
	require.NoError(t, err)
	defer rd.Close()
	rec, err := rd.Pair(context.Background(), "pair-d2")
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, rec.Summary.Status)
	terminals, resumed := 0, 0
	for i, en := range rec.Events {
		require.Equal(t, uint64(i+1), en.Event.Seq(), "a gap in the timeline")
		switch en.Event.Kind() {
		case orchestrator.KindResumed:
			resumed++
		case orchestrator.KindCompleted, orchestrator.KindFailed, orchestrator.KindCancelled:
			terminals++
			require.Equal(t, len(rec.Events), i+1, "the terminal is last")
		}
	}
	require.Equal(t, 1, resumed)
	require.Equal(t, 1, terminals)
}

// TestD2_KilledDuringAMutatingCallEndsUncertain: a worker process is
// SIGKILLed during a call to a mutating tool not declared idempotent;
// the worker it is delivered to never runs the call again, and the job
// ends failed with reason uncertain_tool_call, naming the call.
func TestD2_KilledDuringAMutatingCallEndsUncertain(t *testing.T) {
	st, l, _ := killDuringCall(t, "unsafe")
	require.Equal(t, job.Failed, st.State)
	require.Equal(t, orchestrator.ReasonUncertainCall, st.Reason, st.Error)
	require.Contains(t, st.Error, "c-reviewer")
	_, tools := l.counts()
	require.Equal(t, map[string]int{"pair-d2/c-writer": 1, "pair-d2/c-reviewer": 1}, tools, "the uncertain call ran again")
}

// TestD2_ResumeFromStoreWithoutALiveRecord: a job whose pair the store
// does not hold (it was played on another machine) ends failed
// interrupted, and one whose pair ended before its worker could say so
// ends as its pair did; neither asks the model or runs a tool.
func TestD2_ResumeFromStoreWithoutALiveRecord(t *testing.T) {
	ctx := testCtx(t)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "spice.db"))
	require.NoError(t, err)
	defer st.Close()
	l := newLoopback(t, "")
	build := pairBuilder(st, l.srv.URL, tool.Unsafe)
	resume := ResumeFromStore(st, build)

	rep := resume(ctx, job.Job{ID: "elsewhere", Attempt: 2, Spec: []byte("Write.")})
	require.Equal(t, job.Failed, rep.State)
	require.Equal(t, job.ReasonInterrupted, rep.Reason)

	ended := job.Job{ID: "ended", Attempt: 1, Spec: []byte("Write.")}
	require.Equal(t, job.Completed, playPair(build)(ctx, ended).State)
	models, tools := l.counts()
	ended.Attempt = 2
	rep = resume(ctx, ended)
	require.Equal(t, job.Completed, rep.State, rep.Error)
	m2, t2 := l.counts()
	require.Equal(t, models, m2)
	require.Equal(t, tools, t2)
}
