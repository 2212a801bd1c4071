package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/mcplog"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/pluginlog"
	"github.com/spice-orch/spice-orch/plugins/host"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/compose"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// The recipe of a pair is a log of its own in the store, named
// RecipeLogName(pairID), beside the pair timeline: one event saying what
// `run` was given (the spec file and its SHA-256, the task, the
// workspace), so that `runs resume` can build the same pair again. It
// holds no environment and no key.

// RecipeLogName is the store log of pairID's recipe.
func RecipeLogName(pairID string) string { return pairID + "/recipe" }

const kindRecipe = "pair.recipe"

// maxRecipeBytes bounds the recipe a resume reads.
const maxRecipeBytes = 256 << 10

type recipe struct {
	Spec       string `json:"spec,omitempty"` // absolute; empty for the built-in pair
	SpecSHA256 string `json:"spec_sha256,omitempty"`
	Task       string `json:"task,omitempty"` // --task, if given
	Workspace  string `json:"workspace"`
	Temporary  bool   `json:"temporary,omitempty"`
	Approve    string `json:"approve,omitempty"` // --approve, if given
}

// recordRecipe records what the pair is built from, before it starts.
func recordRecipe(ctx context.Context, st eventlog.Observer, pairID string, args []string, f runFlags, dir string, temporary bool) error {
	r := recipe{Task: f.task, Workspace: dir, Temporary: temporary}
	if f.approveSet {
		r.Approve = f.approve
	}
	if len(args) > 0 {
		abs, err := filepath.Abs(args[0])
		if err != nil {
			return err
		}
		sum, err := fileSHA256(abs)
		if err != nil {
			return err
		}
		r.Spec, r.SpecSHA256 = abs, sum
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	raw, err := eventlog.NewRaw(b)
	if err != nil {
		return err
	}
	l, err := eventlog.New(eventlog.Config{Name: RecipeLogName(pairID), MaxEvents: 16, MaxBytes: 1 << 20,
		Required: []eventlog.Observer{st}})
	if err != nil {
		return err
	}
	defer l.Close(context.WithoutCancel(ctx))
	_, err = l.Append(ctx, eventlog.Record{Kind: kindRecipe, Time: time.Now(), Payload: raw})
	return err
}

func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// resumeJob is what `runs resume` read from the store.
type resumeJob struct {
	pairID    string
	timeline  []orchestrator.RecordedEvent
	accept    []id.Call
	runLogs   map[id.Run][]orchestrator.RecordedEvent
	planID    plan.ID
	digests   map[string]string // plugin name -> SHA-256 the pair's plan ran
	pluginSeq uint64            // the plugin log's last sequence
	mcpSeq    uint64            // the MCP log's last sequence
}

func newResumeCmd(env Env, f *runsFlags) *cobra.Command {
	var accept []string
	var asJSON bool
	var approveFrom string
	cmd := &cobra.Command{
		Use:   "resume ID",
		Short: "Continue a pair that a killed or crashed process left interrupted",
		Long: `Continue an interrupted pair where its record ends: after its last completed
run, restarting the run that was cut off from its input. Nothing with a
recorded outcome is done again: recorded model answers and tool outcomes are
served from the record, so no model is asked twice and no tool runs twice.
The timeline goes on under the same pair ID and sequence, after a
pair.resumed event.

The pair is built again from what 'run' recorded: the same spec file (its
SHA-256 must match), task and workspace, and the exact plan it leased. A
changed spec, a plugin whose binary no longer has the recorded digest, or
a changed or missing tool refuses the resume, and nothing is written.

A mutating tool call that started without a recorded outcome may or may
not have taken effect: the resume is refused (uncertain_tool_call) and the
call named. Check its effect by hand; then --accept-uncertain CALL_ID
answers it as failed and resumes, never running it again. A call to a tool
declared idempotent runs again without asking.

A pair started with an approval policy keeps it. A call whose question was
asked and never answered (the process stopped while it waited) never ran:
it is asked again, with the same digest, and runs only once approved.
With --json or without a terminal, --approve-from FILE gives the answers,
in the format of 'run --approve-from'.`,
		Example: `  spice-orch runs resume pair-20261130-015500-1a2b3c4d
  spice-orch runs resume pair-20261130-015500-1a2b3c4d --accept-uncertain call-3
  spice-orch runs resume pair-20261130-015500-1a2b3c4d --json --approve-from answers.jsonl`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: f.completeIDs(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.readOnly {
				return usageErr(errors.New("--read-only: resume records the rest of the pair"))
			}
			if len(accept) > orchestrator.MaxAccepted {
				return usageErr(fmt.Errorf("--accept-uncertain: at most %d calls", orchestrator.MaxAccepted))
			}
			calls := make([]id.Call, 0, len(accept))
			for _, a := range accept {
				c, err := id.Parse[id.Call]("--accept-uncertain", a)
				if err != nil {
					return usageErr(err)
				}
				calls = append(calls, c)
			}
			if cmd.Flags().Changed("approve-from") && approveFrom == "" {
				return usageErr(errors.New("--approve-from: must not be empty"))
			}
			return resumePair(cmd.Context(), env, f, args[0], calls, asJSON, approveFrom)
		},
	}
	cmd.Flags().StringArrayVar(&accept, "accept-uncertain", nil, "accept this uncertain call as failed (repeatable); it is never run again")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the resumed part of the timeline as JSON lines")
	cmd.Flags().StringVar(&approveFrom, "approve-from", "", "answer approvals from this file of JSON lines, as 'run --approve-from' does")
	return cmd
}

func resumePair(ctx context.Context, env Env, f *runsFlags, pairID string, accept []id.Call, asJSON bool, approveFrom string) error {
	path, err := storePath(f.store, env.Getenv)
	if err != nil {
		return usageErr(err)
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return failed(fmt.Errorf("%s: not found (nothing recorded yet)", pairID))
	}
	st, err := openStore(ctx, path, true)
	if err != nil {
		return failed(err)
	}
	rec, err := st.Pair(ctx, pairID)
	if err != nil {
		st.Close()
		return notFoundOr(pairID, err)
	}
	if rec.Summary.Status != store.StatusInterrupted {
		st.Close()
		return failed(fmt.Errorf("%s is %s: only an interrupted pair resumes", render.Field(pairID), rec.Summary.Status))
	}
	rj := &resumeJob{pairID: pairID, accept: accept}
	r, err := rj.read(ctx, st, rec)
	// The pair records through a store of its own, as `run` does.
	st.Close()
	if err != nil {
		return err
	}
	var s spec.Spec
	var args []string
	if r.Spec == "" {
		s = spec.Builtin()
	} else {
		sum, err := fileSHA256(r.Spec)
		if err != nil {
			return failed(fmt.Errorf("resume refused: spec_changed: %s: %w", render.Field(r.Spec), err))
		}
		if sum != r.SpecSHA256 {
			return failed(fmt.Errorf("resume refused: spec_changed: %s is not the file the pair was started with (sha256 %s, recorded %s)",
				render.Field(r.Spec), sum[:12], r.SpecSHA256[:min(12, len(r.SpecSHA256))]))
		}
		args = []string{r.Spec}
		if err := pluginsUnchanged(pairID, r.Spec); err != nil {
			return err
		}
		if s, err = loadSpec(args); err != nil {
			return err
		}
	}
	if fi, err := os.Stat(r.Workspace); err != nil || !fi.IsDir() {
		return failed(fmt.Errorf("resume refused: the workspace %s is gone", render.Field(r.Workspace)))
	}
	rf := runFlags{task: r.Task, json: asJSON, workspace: r.Workspace, store: f.store,
		approve: r.Approve, approveSet: r.Approve != "", approveTimeout: orchestrator.DefaultApprovalTimeout,
		approveFrom: approveFrom}
	return playPair(ctx, env, rf, s, args, rj)
}

// read collects the recorded timeline, the recipe and the plugin digests.
func (rj *resumeJob) read(ctx context.Context, st *store.Store, rec store.PairRecord) (recipe, error) {
	var r recipe
	rj.timeline = make([]orchestrator.RecordedEvent, 0, len(rec.Events))
	for _, en := range rec.Events {
		raw, ok := en.Event.Payload().(eventlog.Raw)
		if !ok {
			return r, failed(fmt.Errorf("%s: a recorded event has no payload", rj.pairID))
		}
		rj.timeline = append(rj.timeline, orchestrator.RecordedEvent{Seq: en.Event.Seq(), Kind: en.Event.Kind(), Payload: raw.Bytes()})
		if en.Event.Kind() == orchestrator.KindStarted {
			var s struct {
				PlanID string `json:"plan_id"`
			}
			_ = json.Unmarshal(raw.Bytes(), &s)
			rj.planID = plan.ID(s.PlanID)
		}
	}
	// The interrupted run's own log may be ahead of the timeline.
	for _, run := range rec.Runs {
		if run.Status != store.StatusInterrupted {
			continue
		}
		rr, err := st.Run(ctx, run.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return r, failed(err)
		}
		evs := make([]orchestrator.RecordedEvent, 0, len(rr.Events))
		for _, en := range rr.Events {
			raw, ok := en.Event.Payload().(eventlog.Raw)
			if !ok {
				return r, failed(fmt.Errorf("%s: a recorded event has no payload", run.ID))
			}
			evs = append(evs, orchestrator.RecordedEvent{Seq: en.Event.Seq(), Kind: en.Event.Kind(), Payload: raw.Bytes()})
		}
		if rj.runLogs == nil {
			rj.runLogs = map[id.Run][]orchestrator.RecordedEvent{}
		}
		rj.runLogs[id.Run(run.ID)] = evs
	}
	lines, err := logLines(ctx, st, RecipeLogName(rj.pairID))
	if err != nil || len(lines) == 0 {
		return r, failed(fmt.Errorf("%s: no recipe recorded (a pair from an older version cannot be resumed)", rj.pairID))
	}
	var env struct {
		Kind    string `json:"kind"`
		Payload recipe `json:"payload"`
	}
	if len(lines[0]) > maxRecipeBytes || json.Unmarshal(lines[0], &env) != nil || env.Kind != kindRecipe {
		return r, failed(fmt.Errorf("%s: the recorded recipe cannot be read", rj.pairID))
	}
	r = env.Payload
	plugins, err := logLines(ctx, st, pluginlog.Name(rj.pairID))
	if err != nil {
		return r, failed(err)
	}
	rj.pluginSeq = uint64(len(plugins))
	mcps, err := logLines(ctx, st, mcplog.Name(rj.pairID))
	if err != nil {
		return r, failed(err)
	}
	rj.mcpSeq = uint64(len(mcps))
	rj.digests = map[string]string{}
	for _, l := range plugins {
		var e struct {
			Kind    string          `json:"kind"`
			Payload pluginlog.Event `json:"payload"`
		}
		if json.Unmarshal(l, &e) != nil || e.Kind != "plan.activated" || e.Payload.PlanID != string(rj.planID) {
			continue
		}
		for _, g := range e.Payload.Generations {
			rj.digests[g.Name] = g.SHA256
		}
	}
	return r, nil
}

// logLines returns the recorded JSON lines of a log; none for a log the
// store does not hold.
func logLines(ctx context.Context, st *store.Store, log string) ([][]byte, error) {
	var buf bytes.Buffer
	err := st.ReplayJSON(ctx, &buf, log)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out [][]byte
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 0, 64<<10), eventlog.MaxEventBytes+1024)
	for sc.Scan() {
		out = append(out, bytes.Clone(sc.Bytes()))
	}
	return out, sc.Err()
}

// pluginsUnchanged refuses, as the typed plugin_digest_changed, a spec
// whose plugin files no longer hash to the pins the pair ran with: the
// spec file is unchanged (its digest was checked), so its pins are the
// recorded ones, and loading it would call the drift a usage mistake.
func pluginsUnchanged(pairID, path string) error {
	s, err := spec.DecodeFile(path)
	if err != nil {
		return usageErr(err)
	}
	for _, p := range s.Plugins {
		got, err := host.DigestFiles(p.Path, p.Root, p.Files)
		if err != nil || got != p.SHA256 {
			return resumeRefused(pairID, &orchestrator.ResumeError{Reason: orchestrator.ReasonPluginChanged, Tool: p.Path})
		}
	}
	return nil
}

// checkPlugins refuses a pair whose plugins no longer have the digests
// its recorded plan ran: the plan ID and tool contracts can be the same
// over another binary.
func (rj *resumeJob) checkPlugins(built *compose.Pair) error {
	if len(rj.digests) == 0 {
		return nil
	}
	gp, ok := built.PluginPlan(rj.planID)
	if !ok {
		return resumeRefused(rj.pairID, &orchestrator.ResumeError{Reason: orchestrator.ReasonPlanUnavailable})
	}
	for _, g := range gp.Generations {
		if want, ok := rj.digests[g.Name]; ok && want != g.Digest {
			return resumeRefused(rj.pairID, &orchestrator.ResumeError{Reason: orchestrator.ReasonPluginChanged, Tool: g.Name})
		}
	}
	return nil
}

// resumeRefused explains a refusal. An uncertain call is named with what
// to do about it.
func resumeRefused(pairID string, err error) error {
	var re *orchestrator.ResumeError
	if !errors.As(err, &re) {
		return failed(err)
	}
	msg := "resume refused: " + re.Reason
	switch re.Reason {
	case orchestrator.ReasonUncertainCall:
		if re.Err != nil {
			return usageErr(fmt.Errorf("--accept-uncertain %s: not an uncertain call of the interrupted run", render.Field(string(re.CallID))))
		}
		msg += fmt.Sprintf(": %s (call %s of run %s) started and its outcome was never recorded; its effect may or may not have happened.\n"+
			"Check it, then: spice-orch runs resume %s --accept-uncertain %s",
			render.Field(re.Tool), render.Field(string(re.CallID)), render.Field(string(re.RunID)), render.Field(pairID), render.Field(string(re.CallID)))
	case orchestrator.ReasonPluginChanged:
		if re.Tool != "" {
			msg += ": plugin " + render.Field(re.Tool) + " no longer has the digest the pair ran"
		} else {
			msg += ": a plugin binary no longer has the digest the pair ran"
		}
	case orchestrator.ReasonNotJournaled:
		msg += ": the model answers of run " + render.Field(string(re.RunID)) +
			" were not recorded (a pair recorded by an older version), and restarting it would ask the model again"
	case orchestrator.ReasonToolMissing:
		msg += ": tool " + render.Field(re.Tool) + " is not in the plan"
	default:
		if re.Err != nil {
			msg += ": " + render.Text(re.Err.Error())
		}
	}
	return failed(errors.New(msg))
}
