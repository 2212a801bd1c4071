package orchestrator_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/orchestrator"
)

func TestO7_LateSubscriberSeesEveryEventWithoutGaps(t *testing.T) {
	for _, d := range []orchestrator.Delivery{orchestrator.Live, orchestrator.AfterRun} {
		t.Run(d.String(), func(t *testing.T) {
			h := approvedInTwoRounds(t, d)
			reviewing, proceed := make(chan struct{}), make(chan struct{})
			h.cfg.Second.Engine.Provider = &hookProvider{inner: h.second, hook: func(_ context.Context, n int) error {
				if n == 1 {
					close(reviewing)
					<-proceed
				}
				return nil
			}}
			p, err := orchestrator.Start(context.Background(), h.cfg)
			require.NoError(t, err)
			<-reviewing // the pair is in the middle of its first review
			joined := p.Stats().LastSeq
			require.Greater(t, joined, uint64(5))
			sub, err := p.Subscribe(context.Background(), 0)
			require.NoError(t, err)
			close(proceed)
			var got []eventlog.Event
			for e, err := range sub.All(context.Background()) {
				require.NoError(t, err)
				got = append(got, e)
			}
			_, err = p.Wait(context.Background())
			require.NoError(t, err)

			requireTimeline(t, got)
			want := h.timeline.Events() // what the required observer saw live
			require.Len(t, got, len(want))
			for i := range want {
				require.Equal(t, want[i].Seq(), got[i].Seq())
				require.Equal(t, string(want[i].AppendJSON(nil)), string(got[i].AppendJSON(nil)))
				require.Equal(t, h.cfg.ID, want[i].Log(), "a shared observer (a store) files the timeline under the pair ID")
			}
		})
	}
}

func TestO7_RelayedEventsKeepTheKernelKindAndPayload(t *testing.T) {
	h := approvedInTwoRounds(t, orchestrator.Live)
	writer, reviewer := &enginetest.Recorder{}, &enginetest.Recorder{}
	h.cfg.First.Engine.Required = []eventlog.Observer{writer}
	h.cfg.Second.Engine.Required = []eventlog.Observer{reviewer}
	p, _, err := h.run(t)
	require.NoError(t, err)

	kernel := map[string][]eventlog.Event{"writer": writer.Events(), "reviewer": reviewer.Events()}
	next := map[string]int{}
	for _, e := range timeline(t, p) {
		r, ok := e.Payload().(orchestrator.Relayed)
		if !ok {
			require.True(t, slices.Contains(slices.Collect(orchestrator.Kinds()), e.Kind()), e.Kind())
			continue
		}
		k := kernel[r.Worker()][next[r.Worker()]]
		next[r.Worker()]++
		require.Equal(t, k.Kind(), e.Kind())
		require.Equal(t, k.Seq(), r.RunSeq())
		require.Equal(t, k.Time(), e.Time())
		require.Equal(t, string(k.Payload().AppendJSON(nil)), string(r.Payload().AppendJSON(nil)))
		require.Equal(t, `{"worker":"`+r.Worker()+`","run_id":"`+string(r.RunID())+`","run_seq":`+
			strconv.FormatUint(r.RunSeq(), 10)+`,"payload":`+jsonOf(t, k.Payload())+`}`, jsonOf(t, r))
	}
	require.Equal(t, len(kernel["writer"]), next["writer"], "every writer event relayed")
	require.Equal(t, len(kernel["reviewer"]), next["reviewer"], "every reviewer event relayed")
}

func TestO7_BothDeliveriesWriteTheSameTimeline(t *testing.T) {
	encode := func(d orchestrator.Delivery) []string {
		p, _, err := approvedInTwoRounds(t, d).run(t)
		require.NoError(t, err)
		var out []string
		for _, e := range timeline(t, p) {
			b := e.AppendJSON(nil)
			// The timeline's byte bound relies on exact lengths, which
			// the relay works out without measuring the payload again.
			require.Equal(t, len(b), e.EncodedLen(), "%s", b)
			jsonOf(t, e.Payload())
			out = append(out, string(b))
		}
		return out
	}
	live := encode(orchestrator.Live)
	require.Equal(t, live, encode(orchestrator.Live), "deterministic")
	require.Equal(t, live, encode(orchestrator.AfterRun))
}

func TestO7_PairPayloadsEncodeCanonically(t *testing.T) {
	require.Equal(t,
		`{"pair_id":"p-1","plan_id":"plan-1","plan_fingerprint":"ab`+strings.Repeat("0", 62)+`","pattern":"relay","workers":{"first":"writer","second":"reviewer"}}`,
		jsonOf(t, orchestrator.Started{PairID: "p-1", PlanID: "plan-1", PlanFingerprint: plan.Fingerprint{0xab}, Pattern: "relay", First: "writer", Second: "reviewer"}))
	require.Equal(t,
		`{"round":2,"from":"reviewer","to":"writer","from_run_id":"run-3","last_seq":7,"sha256":"00ff`+strings.Repeat("0", 60)+`","bytes":40,"answer_bytes":9,"cut":false}`,
		jsonOf(t, orchestrator.HandedOff{Round: 2, From: "reviewer", To: "writer", FromRunID: "run-3", LastSeq: 7, SHA256: [32]byte{0x00, 0xff}, Bytes: 40, AnswerBytes: 9}))
	require.Equal(t,
		`{"pair_id":"p-1","reason":"completed","rounds":1,"runs":2,"input_tokens":20,"output_tokens":10,"tool_calls":0}`,
		jsonOf(t, orchestrator.Ended{PairID: "p-1", Reason: orchestrator.ReasonCompleted, Rounds: 1, Runs: 2, InputTokens: 20, OutputTokens: 10}))
	require.Equal(t,
		`{"pair_id":"p-1","reason":"budget_exhausted","limit":"tool_calls","rounds":1,"runs":1,"input_tokens":0,"output_tokens":0,"tool_calls":2,"worker":"writer","run_id":"run-1","problem":{"code":"x","message":"y \"z\""}}`,
		jsonOf(t, orchestrator.Ended{PairID: "p-1", Reason: orchestrator.ReasonBudgetExhausted, Limit: orchestrator.LimitToolCalls,
			Rounds: 1, Runs: 1, ToolCalls: 2, Worker: "writer", RunID: "run-1", Problem: problem.Must("x", `y "z"`)}))
	require.Equal(t, `{"worker":"w","run_id":"r","run_seq":1,"payload":{}}`, jsonOf(t, orchestrator.NewRelayed("w", "r", 1, nil)))
	require.Equal(t, `{"worker":"","run_id":"","run_seq":0,"payload":{}}`, jsonOf(t, orchestrator.Relayed{}))
}

func TestO7_PairKindsAreDefinedOutsideTheKernel(t *testing.T) {
	pair := slices.Collect(orchestrator.Kinds())
	require.Equal(t, []string{"pair.started", "pair.handoff", "pair.final_answer", "pair.completed", "pair.failed", "pair.cancelled", "pair.resumed", "pair.model_output"}, pair)
	for k := range event.Kinds() {
		require.NotContains(t, pair, k)
		require.False(t, orchestrator.Terminal(k))
	}
	for _, r := range []orchestrator.Reason{orchestrator.ReasonCompleted, orchestrator.ReasonApproved} {
		require.Equal(t, orchestrator.KindCompleted, orchestrator.Ended{Reason: r}.Kind())
	}
	require.Equal(t, orchestrator.KindCancelled, orchestrator.Ended{Reason: orchestrator.ReasonCancelled}.Kind())
	for _, r := range []orchestrator.Reason{orchestrator.ReasonMaxRounds, orchestrator.ReasonBudgetExhausted,
		orchestrator.ReasonLoopDetected, orchestrator.ReasonWorkerFailed, orchestrator.ReasonHandoffRejected, orchestrator.ReasonInfrastructure} {
		require.Equal(t, orchestrator.KindFailed, orchestrator.Ended{Reason: r}.Kind(), r.String())
	}
}

func TestO7_ARefusingTimelineObserverFailsThePair(t *testing.T) {
	refuse := errors.New("disk full")
	for name, kind := range map[string]string{"pair event": orchestrator.KindHandoff, "relayed event": event.KindModelCompleted} {
		for _, d := range []orchestrator.Delivery{orchestrator.Live, orchestrator.AfterRun} {
			t.Run(name+"/"+d.String(), func(t *testing.T) {
				h := newHarness(t, orchestrator.Relay, script{enginetest.Answer("A.")}, script{enginetest.Answer("B.")})
				h.cfg.Timeline.Delivery = d
				h.timeline.Hook = func(_ context.Context, e eventlog.Event) error {
					if e.Kind() == kind {
						return refuse
					}
					return nil
				}
				p, res, err := h.run(t)
				require.ErrorIs(t, err, orchestrator.ErrInfrastructure)
				require.ErrorIs(t, err, refuse)
				var oe *eventlog.ObserverError
				require.ErrorAs(t, err, &oe)
				require.Equal(t, orchestrator.ReasonInfrastructure, res.Reason)
				require.Zero(t, h.second.Calls(), "no run after the timeline failed")
				requireTimeline(t, timeline(t, p))
			})
		}
	}
}

func TestO7_ATerminalTheTimelineCannotKeepIsADurabilityError(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, script{enginetest.Answer("A.")}, script{enginetest.Answer("B.")})
	refuse := errors.New("disk full")
	h.timeline.Hook = func(_ context.Context, e eventlog.Event) error {
		if orchestrator.Terminal(e.Kind()) {
			return refuse
		}
		return nil
	}
	p, res, err := h.run(t)
	var de *orchestrator.DurabilityError
	require.ErrorAs(t, err, &de)
	require.ErrorIs(t, err, refuse)
	require.NoError(t, de.Outcome)
	require.Equal(t, res.LastSeq, de.Seq)
	require.Equal(t, orchestrator.ReasonCompleted, res.Reason)
	requireTimeline(t, timeline(t, p))
}

// TestO7_RelayedEventsNameTheirRunEvenAfterEviction: with after-run
// delivery, a writer run whose own log evicted its run.started still has
// every relayed event filed under its own run ID, in both rounds.
func TestO7_RelayedEventsNameTheirRunEvenAfterEviction(t *testing.T) {
	long := func(word string) []model.Item {
		items := make([]model.Item, 0, 41)
		for i := range 40 {
			items = append(items, enginetest.Text(word+strconv.Itoa(i)+" "))
		}
		return append(items, enginetest.Done(1, 1))
	}
	h := newHarness(t, orchestrator.ReviewLoop, script{long("draft"), long("revision")},
		script{enginetest.Answer("Shorter."), enginetest.Answer("APPROVED")})
	h.cfg.Timeline.Delivery = orchestrator.AfterRun
	h.cfg.First.Engine.Limits.MaxEvents = 16
	p, _, err := h.run(t)
	require.NoError(t, err)
	seqs := map[id.Run][]uint64{}
	for _, e := range timeline(t, p) {
		if r, ok := e.Payload().(orchestrator.Relayed); ok && r.Worker() == "writer" {
			seqs[r.RunID()] = append(seqs[r.RunID()], r.RunSeq())
		}
	}
	require.Len(t, seqs, 2, "two writer runs, each under its own ID")
	for run, s := range seqs {
		require.NotEmpty(t, run)
		require.Greater(t, s[0], uint64(1), "run.started was evicted from the run log")
		for i := 1; i < len(s); i++ {
			require.Equal(t, s[i-1]+1, s[i], "run %s relayed without a gap", run)
		}
	}
}
