package acceptance

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRuntimeCheckFailsWhenAPluginOutlivesTheHost: a plugin process still
// running after the host stopped, or a failed close, fails the runtime
// part; CheckRuntime reports it.
func TestRuntimeCheckFailsWhenAPluginOutlivesTheHost(t *testing.T) {
	line, err := checkStopped(nil, []int{}, alive)
	require.NoError(t, err)
	require.Equal(t, "host closed: 0 of 0 plugin processes gone by PID", line)

	// A real process that outlived "the host".
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		require.False(t, alive(pid), "the sleep process %d is still running", pid)
	})
	line, err = checkStopped(nil, []int{pid}, alive)
	requireBreak(t, err, PartRuntime, "is still running after the host stopped")
	require.Equal(t, "host closed: 0 of 1 plugin processes gone by PID", line)
	p := &Played{Runtime: &RuntimeReport{Err: err}}
	requireBreak(t, checkRuntimeReport(p, &RuntimeToolPart{}), PartRuntime, "still running")

	// Closing the host failed, every process gone.
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	line, err = checkStopped(errors.New("a plugin did not stop in time"), []int{pid}, alive)
	requireBreak(t, err, PartRuntime, "closing the plugin host: a plugin did not stop in time")
	require.Equal(t, "host closed with an error: 1 of 1 plugin processes gone by PID", line)
}

// TestTimelineRefusesALifecycleStartedAgainAfterItsTerminal: a run, turn,
// model or tool operation started again after it ended is refused.
func TestTimelineRefusesALifecycleStartedAgainAfterItsTerminal(t *testing.T) {
	head := `{"seq":1,"kind":"pair.started","payload":{}}
{"seq":2,"kind":"run.started","payload":{"worker":"w","run_id":"r1","run_seq":1,"payload":{"run_id":"r1"}}}
{"seq":3,"kind":"turn.started","payload":{"worker":"w","run_id":"r1","run_seq":2,"payload":{"turn_id":"t1"}}}
{"seq":4,"kind":"turn.completed","payload":{"worker":"w","run_id":"r1","run_seq":3,"payload":{"turn_id":"t1"}}}
`
	tail := `{"seq":6,"kind":"turn.completed","payload":{"worker":"w","run_id":"r1","run_seq":5,"payload":{"turn_id":"t1"}}}
{"seq":7,"kind":"run.completed","payload":{"worker":"w","run_id":"r1","run_seq":6,"payload":{"run_id":"r1"}}}
{"seq":8,"kind":"pair.completed","payload":{"reason":"approved"}}
`
	good := head + `{"seq":5,"kind":"turn.started","payload":{"worker":"w","run_id":"r1","run_seq":4,"payload":{"turn_id":"t2"}}}
` + strings.Replace(tail, `"turn_id":"t1"`, `"turn_id":"t2"`, 1)
	_, err := CheckTimeline([]byte(good))
	require.NoError(t, err)

	again := head + `{"seq":5,"kind":"turn.started","payload":{"worker":"w","run_id":"r1","run_seq":4,"payload":{"turn_id":"t1"}}}
` + tail
	_, err = CheckTimeline([]byte(again))
	require.ErrorContains(t, err, "turn t1 started twice (at 5)")
}
