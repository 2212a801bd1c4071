package orchestrator_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// discard is a required timeline observer that keeps nothing, so that the
// two benchmarks below pay the same for recording.
type discard struct{}

func (discard) Observe(context.Context, eventlog.Event) error { return nil }

const benchRounds = 16

// BenchmarkResumeFromBoundary resumes a 16-round review loop from its
// last run boundary (the last handoff before its last run): 31 recorded
// runs and handoffs are walked past, and one run is played.
// BenchmarkResumeFreshPair plays the same pair from its start.
func BenchmarkResumeFromBoundary(b *testing.B) {
	d := newDurablePair(b, benchRounds, tool.Unsafe)
	whole := &cutRecorder{}
	p, err := orchestrator.Run(context.Background(), d.config(b, whole))
	require.NoError(b, err)
	_, err = p.Wait(context.Background())
	require.ErrorIs(b, err, orchestrator.ErrMaxRounds)
	evs := whole.events()
	last := 0
	for i, e := range evs {
		if e.Kind == orchestrator.KindHandoff {
			last = i
		}
	}
	prefix := evs[:last+1]
	b.ReportAllocs()
	for b.Loop() {
		p, err := orchestrator.RunResumed(context.Background(), orchestrator.ResumeConfig{
			Pair: d.config(b, discard{}), Timeline: prefix})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Wait(context.Background()); err == nil {
			b.Fatal("want max rounds")
		}
	}
}

func BenchmarkResumeFreshPair(b *testing.B) {
	d := newDurablePair(b, benchRounds, tool.Unsafe)
	b.ReportAllocs()
	for b.Loop() {
		p, err := orchestrator.Run(context.Background(), d.config(b, discard{}))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Wait(context.Background()); err == nil {
			b.Fatal("want max rounds")
		}
	}
}
