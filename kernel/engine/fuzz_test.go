package engine_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// maxFuzzSnapshot keeps fuzz inputs small; DecodeSnapshot's own bound
// (MaxSnapshotBytes) is checked by TestK29_ImportStrict.
const maxFuzzSnapshot = 64 << 10

// FuzzDecodeSnapshot: snapshots are outside bytes. Decoding never panics,
// every refusal is a typed *bound.Error, and whatever is accepted encodes
// deterministically: decode, encode, decode and encode again gives the
// same bytes and the same snapshot.
func FuzzDecodeSnapshot(f *testing.F) {
	_, suspended := suspendedToolRun(f)
	f.Add(suspended)

	fx := newFixture(f, fixtureConfig{
		tools: []tool.Tool{enginetest.Echo()},
		script: [][]model.Item{
			{enginetest.Text("Let me check."), enginetest.Call("call-1", "echo", `{"path": "a<b>&c", "n": [1, 2.5e3]}`), enginetest.Done(10, 5)},
			enginetest.Answer("done"),
		},
	})
	r, _, err := fx.run(f, 4)
	if err != nil {
		f.Fatal(err)
	}
	completed, err := r.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(completed)
	if err := fx.eng.Close(context.Background()); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", "null", "{}", `{"version":1}`, "[]", `{"version":1,"VERSION":2}`} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzSnapshot {
			t.Skip()
		}
		s1, err := engine.DecodeSnapshot(b)
		if err != nil {
			var be *bound.Error
			if !errors.As(err, &be) || !errors.Is(err, bound.ErrInvalid) {
				t.Fatalf("untyped decode error %T: %v", err, err)
			}
			return
		}
		e1, err := engine.EncodeSnapshot(s1)
		if err != nil {
			t.Fatalf("an accepted snapshot does not encode: %v", err)
		}
		s2, err := engine.DecodeSnapshot(e1)
		if err != nil {
			t.Fatalf("the encoding of an accepted snapshot is refused: %v\n%s", err, e1)
		}
		e2, err := engine.EncodeSnapshot(s2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(e1, e2) {
			t.Fatalf("encoding is not deterministic:\n%s\n%s", e1, e2)
		}
		if s1.RunID() != s2.RunID() || s1.Status() != s2.Status() || s1.Plan() != s2.Plan() ||
			s1.Definition() != s2.Definition() || s1.LastSeq() != s2.LastSeq() || s1.Turns() != s2.Turns() ||
			!slices.Equal(slices.Collect(s1.Interactions()), slices.Collect(s2.Interactions())) {
			t.Fatalf("the snapshot changed through a round trip:\n%s", e1)
		}
		h1, h2 := slices.Collect(s1.History()), slices.Collect(s2.History())
		if len(h1) != len(h2) {
			t.Fatalf("history length %d became %d", len(h1), len(h2))
		}
		for i := range h1 {
			if h1[i].Role() != h2[i].Role() || h1[i].Len() != h2[i].Len() || h1[i].Text() != h2[i].Text() {
				t.Fatalf("history message %d changed through a round trip", i)
			}
		}
	})
}
