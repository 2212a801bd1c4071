package acceptance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spice-orch/spice-orch/handoff"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// The parts of the boundary proof's acceptance evidence, and its own checks,
// as the ledger and every failure name them.
const (
	PartProvider   = "real provider"
	PartTool       = "compiled tool"
	PartRuntime    = "runtime tool"
	PartObserver   = "persistence observer"
	PartClient     = "alternate client"
	PartReplay     = "timeline replay"
	PartTwoWorker  = "two-worker extension"
	PartCancel     = "cancellation"
	PartPanic      = "panic containment"
	PartKernel     = "no kernel change"
	PartSnapshot   = "snapshot round trip"
	PartLedger     = "ledger"
	partNamePrefix = "boundary proof, part "
)

// PartError is a failed check, named by its part.
type PartError struct {
	Part string
	Err  error
}

func (e *PartError) Error() string { return partNamePrefix + e.Part + ": " + e.Err.Error() }
func (e *PartError) Unwrap() error { return e.Err }

func fail(part, format string, args ...any) error {
	return &PartError{Part: part, Err: fmt.Errorf(format, args...)}
}

func wrap(part string, err error) error {
	if err == nil {
		return nil
	}
	var pe *PartError
	if errors.As(err, &pe) {
		return err
	}
	return &PartError{Part: part, Err: err}
}

// CheckProvider: the OpenAI-compatible provider spoke real HTTP to both
// model servers, one accepted request per model operation, each holding
// what the pair must send (checkRequests: the key, `stream: true`, the
// leased plan's tools, the conversation with the handoff message and the
// tool results byte for byte), and assembled what the transcripts sent:
// the usage of each last chunk, and the fs.write arguments split across
// chunks (CheckTool reads the file they wrote). The writer's API key is in
// no recorded byte.
func CheckProvider(p *Played) error {
	lines, err := ParseLines(p.Subscribed)
	if err != nil {
		return wrap(PartProvider, err)
	}
	if err := checkRequests(p, lines); err != nil {
		return wrap(PartProvider, err)
	}
	for i, n := range p.Requests {
		if n != p.WantRequests[i] {
			return fail(PartProvider, "%s received %d requests, want %d", p.Expect[i].Name, n, p.WantRequests[i])
		}
	}
	var got [][2]int
	for _, l := range lines {
		if l.Kind == "model.completed" {
			var in, out int
			fmt.Sscan(string(l.Inner["input_tokens"]), &in)
			fmt.Sscan(string(l.Inner["output_tokens"]), &out)
			got = append(got, [2]int{in, out})
		}
	}
	if len(got) == 0 || !slices.Equal(got, p.Usage) {
		return fail(PartProvider, "model operations reported usage %v, want the last chunks of the transcripts played, %v", got, p.Usage)
	}
	if bytes.Contains(p.Subscribed, []byte(WriterKey)) {
		return fail(PartProvider, "the API key is in the timeline")
	}
	return nil
}

// CheckTool: the writer called the compiled fs.write once per round with
// the arguments the transcripts split across chunks (the file holds the
// second draft whole), and every run of both workers and the pair itself
// used the one leased plan.
func CheckTool(p *Played) error {
	s, err := CheckTimeline(p.Subscribed)
	if err != nil {
		return wrap(PartTool, err)
	}
	// Runtime tools (the reviewer's) may be called besides.
	if writes := slices.DeleteFunc(slices.Clone(s.ToolCalls), func(n string) bool { return n != "fs.write" }); len(writes) != 2 {
		return fail(PartTool, "tool calls %v, want fs.write twice", s.ToolCalls)
	}
	lines, _ := ParseLines(p.Subscribed)
	planID := string(p.Plan.ID)
	if planID == "" || str(lines[0].Payload, orchestrator.FieldPlanID) != planID {
		return fail(PartTool, "pair.started names plan %q, the pair leased %q", str(lines[0].Payload, orchestrator.FieldPlanID), planID)
	}
	completed := 0
	for _, l := range lines {
		switch l.Kind {
		case "run.started":
			if got := str(l.Inner, orchestrator.FieldPlanID); got != planID {
				return fail(PartTool, "run %s used plan %q, not the pair's %q", l.RunID, got, planID)
			}
		case "tool.completed":
			if str(l.Inner, "name") == "fs.write" && strings.HasPrefix(str(l.Inner, "content"), `{"path":"poem.md","bytes":`) {
				completed++
			}
		}
	}
	if completed != 2 {
		return fail(PartTool, "%d fs.write calls completed with a result, want 2", completed)
	}
	b, err := os.ReadFile(filepath.Join(p.Workspace, PoemPath))
	if err != nil {
		return wrap(PartTool, err)
	}
	if string(b) != FinalPoem {
		return fail(PartTool, "%s holds %q, want the second draft %q from the split tool-call chunks", PoemPath, b, FinalPoem)
	}
	return nil
}

// replay reads a log back from st as `runs replay --json` prints it.
func replay(ctx context.Context, st *store.Store, log string) ([]byte, error) {
	var buf bytes.Buffer
	if err := st.ReplayJSON(ctx, &buf, log); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// CheckObserver: every event the store acknowledged, of both workers' run
// logs and of the pair timeline, is in the store in order and byte for
// byte, and the store holds nothing it did not acknowledge; every event of
// the in-process subscriber's timeline was acknowledged.
func CheckObserver(ctx context.Context, p *Played, st *store.Store) error {
	logs := p.Acked.Logs()
	if !slices.Contains(logs, p.PairID) {
		return fail(PartObserver, "the store acknowledged no event of the pair timeline %s", p.PairID)
	}
	runs := 0
	for _, log := range logs {
		acked := p.Acked.Events(log)
		got, err := replay(ctx, st, log)
		if err != nil {
			return fail(PartObserver, "reading log %s back: %v", log, err)
		}
		rows := bytes.SplitAfter(got, []byte("\n"))
		rows = rows[:len(rows)-1]
		for i, a := range acked {
			if i >= len(rows) {
				return fail(PartObserver, "log %s: acknowledged event %d of %d is missing from the store", log, i+1, len(acked))
			}
			if !bytes.Equal(bytes.TrimSuffix(rows[i], []byte("\n")), a) {
				return fail(PartObserver, "log %s: the store's event %d differs from the one it acknowledged:\nstore: %s\nacked: %s", log, i+1, rows[i], a)
			}
		}
		if len(rows) != len(acked) {
			return fail(PartObserver, "log %s: the store holds %d events, it acknowledged %d", log, len(rows), len(acked))
		}
		if log != p.PairID {
			runs++
		}
	}
	if runs != 4 && p.Result.Reason == orchestrator.ReasonApproved {
		return fail(PartObserver, "the store recorded %d run logs, want 4", runs)
	}
	var acked bytes.Buffer
	for _, a := range p.Acked.Events(p.PairID) {
		acked.Write(a)
		acked.WriteByte('\n')
	}
	if !bytes.HasPrefix(acked.Bytes(), p.Subscribed) || acked.Len() != len(p.Subscribed) {
		return fail(PartObserver, "the subscriber saw %d timeline bytes, the store acknowledged %d: an event reached a client unacknowledged", len(p.Subscribed), acked.Len())
	}
	return nil
}

// CheckClients: every client's copy of the timeline is the in-process
// subscriber's, byte for byte. Each client is named; "runs replay --json"
// is the store's replay of the pair.
func CheckClients(part string, want []byte, clients map[string][]byte) error {
	names := make([]string, 0, len(clients))
	for n := range clients {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if got := clients[n]; !bytes.Equal(got, want) {
			return fail(part, "%s differs from the in-process subscriber's timeline: %s", n, firstDifference(want, got))
		}
	}
	return nil
}

// firstDifference names the first line where got leaves want.
func firstDifference(want, got []byte) string {
	w, g := bytes.Split(want, []byte("\n")), bytes.Split(got, []byte("\n"))
	for i := range max(len(w), len(g)) {
		var a, b []byte
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if !bytes.Equal(a, b) {
			return fmt.Sprintf("line %d (of %d and %d):\nwant: %s\ngot:  %s", i+1, len(w)-1, len(g)-1, a, b)
		}
	}
	return "no difference"
}

// CheckReplay: the in-process subscriber's timeline is what `runs replay
// --json` prints for the pair (store.ReplayJSON), byte for byte.
func CheckReplay(ctx context.Context, p *Played, st *store.Store) error {
	got, err := replay(ctx, st, p.PairID)
	if err != nil {
		return fail(PartReplay, "runs replay --json %s: %v", p.PairID, err)
	}
	return CheckClients(PartReplay, p.Subscribed, map[string][]byte{"runs replay --json": got})
}

// CheckTwoWorker: the review loop ran writer, reviewer, writer, reviewer,
// the first review rejected the draft (no approval line), the second
// approved it, and the pair ended approved after two rounds.
func CheckTwoWorker(p *Played) error {
	if p.Err != nil || p.RunErr != nil {
		return fail(PartTwoWorker, "the pair failed: %v %v", p.RunErr, p.Err)
	}
	s, err := CheckTimeline(p.Subscribed)
	if err != nil {
		return wrap(PartTwoWorker, err)
	}
	if !slices.Equal(s.Workers, []string{"writer", "reviewer", "writer", "reviewer"}) {
		return fail(PartTwoWorker, "runs %v, want writer, reviewer, writer, reviewer", s.Workers)
	}
	approved := func(text string) bool {
		return slices.Contains(strings.Split(text, "\n"), handoff.DefaultDoneMarker)
	}
	if approved(s.Finals[1]) || !approved(s.Finals[3]) {
		return fail(PartTwoWorker, "want a rejected first review and an approving second: %q, %q", s.Finals[1], s.Finals[3])
	}
	if s.Terminal != orchestrator.KindCompleted || s.Reason != "approved" || p.Result.Reason != orchestrator.ReasonApproved || p.Result.Rounds != 2 {
		return fail(PartTwoWorker, "the pair ended %s (%s), result %s after %d rounds; want approved after 2", s.Terminal, s.Reason, p.Result.Reason, p.Result.Rounds)
	}
	if s.Handoffs != 3 {
		return fail(PartTwoWorker, "%d handoffs, want 3", s.Handoffs)
	}
	return nil
}

// CheckPlay runs the checks of one good play in the order that names the
// part that broke: the store first (without it nothing else is recorded),
// then the clients, the provider, the compiled tool, the runtime tool when
// present, and the pattern.
func CheckPlay(ctx context.Context, p *Played, st *store.Store, runtime *RuntimeToolPart, client AlternateClient) error {
	if err := CheckObserver(ctx, p, st); err != nil {
		return err
	}
	if err := CheckReplay(ctx, p, st); err != nil {
		return err
	}
	if client != nil {
		if err := CheckClient(p, client); err != nil {
			return err
		}
	}
	if err := CheckProvider(p); err != nil {
		return err
	}
	if err := CheckTool(p); err != nil {
		return err
	}
	if runtime != nil {
		if err := CheckRuntime(p, runtime); err != nil {
			return err
		}
	}
	return CheckTwoWorker(p)
}

// CheckClient: the alternate client received the in-process subscriber's
// timeline byte for byte.
func CheckClient(p *Played, client AlternateClient) error {
	if p.ClientErr != nil {
		return fail(PartClient, "%s: %v", client.Name(), p.ClientErr)
	}
	return CheckClients(PartClient, p.Subscribed, map[string][]byte{client.Name(): p.ClientTimeline})
}

// CheckRuntime: the reviewer called one of the runtime part's tools under
// the pair's plan and it completed; every plugin process the play started
// ran the pinned executable and is gone, by PID, after the host stopped.
func CheckRuntime(p *Played, rt *RuntimeToolPart) error {
	lines, err := ParseLines(p.Subscribed)
	if err != nil {
		return wrap(PartRuntime, err)
	}
	names := make(map[string]bool)
	for _, n := range rt.Tools {
		names[n] = true
	}
	called := false
	for _, l := range lines {
		if l.Kind == "tool.completed" && l.Worker == "reviewer" && names[str(l.Inner, "name")] {
			called = true
			break
		}
	}
	if !called {
		return fail(PartRuntime, "the reviewer completed no call of a runtime tool")
	}
	return checkRuntimeReport(p, rt)
}

// checkRuntimeReport: the plugin host closed without an error, every
// process it started is gone, and each ran the pinned executable.
func checkRuntimeReport(p *Played, rt *RuntimeToolPart) error {
	if p.Runtime == nil {
		return fail(PartRuntime, "the pair ran without the plugin host's plan source")
	}
	if p.Runtime.Err != nil {
		return wrap(PartRuntime, p.Runtime.Err)
	}
	for i, c := range rt.Plugins {
		if i >= len(p.Runtime.Digests) || p.Runtime.Digests[i] != c.SHA256 {
			return fail(PartRuntime, "plugin %d ran executable %v, pinned %s", i+1, p.Runtime.Digests, c.SHA256)
		}
	}
	return nil
}
