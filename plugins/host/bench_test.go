package host

import (
	"context"
	"testing"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// BenchmarkPluginCall is one echo call through the canonical dispatcher
// to the fixture process and back.
func BenchmarkPluginCall(b *testing.B) {
	p := launch(b, config(b, fixtureV1, ""))
	d := dispatcher(b, p.Tools()...)
	c := call(b, "c1", "echo", `{"text":"hello"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Dispatch(ctx, c, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompiledEcho is the same call to a compiled echo tool, for the
// ratio of the two.
func BenchmarkCompiledEcho(b *testing.B) {
	d := dispatcher(b, enginetest.Echo())
	c := call(b, "c1", "echo", `{"text":"hello"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Dispatch(ctx, c, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPluginLaunch is launch, verification (digest, handshake,
// manifest) and Close of the fixture.
func BenchmarkPluginLaunch(b *testing.B) {
	cfg := config(b, fixtureV1, "")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := Launch(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Tools()) == 0 {
			b.Fatal("no tools")
		}
		_ = p.Close()
	}
}

var _ tool.Tool = enginetest.Echo()

// BenchmarkPluginActivate is a candidate's launch and verification to its
// activation for future leases (the old generation drains in the
// background).
func BenchmarkPluginActivate(b *testing.B) {
	s, err := NewSource(context.Background(), SourceConfig{PlanPrefix: "plan-b", Plugins: []Config{config(b, fixtureV1, "")}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cfg := config(b, fixtureV2, "")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Reload(ctx, 0, cfg); err != nil {
			b.Fatal(err)
		}
	}
}
