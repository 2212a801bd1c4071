package client

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spice-orch/spice-orch/kernel/tool"
)

// bareSession connects the bare SDK client to the same fixture server,
// started the SDK's own way.
func bareSession(b *testing.B) *sdk.ClientSession {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{envServe + "=1"}
	c := sdk.NewClient(&sdk.Implementation{Name: "bare", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkMCPCall is one echo call through the canonical dispatcher to
// the Go SDK's server over stdio, alternating round by round with the same
// call made by the bare SDK client to its own server process, so that
// both see the same machine: ns/op is the client's call, sdk-ns/op the
// bare call's, and ratio the first over the second.
func BenchmarkMCPCall(b *testing.B) {
	s, err := Connect(context.Background(), fixtureConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: s.Tools()})
	if err != nil {
		b.Fatal(err)
	}
	c, err := tool.NewCall("c1", "echo", []byte(`{"text":"hello"}`))
	if err != nil {
		b.Fatal(err)
	}
	bare := bareSession(b)
	params := &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}
	ctx := context.Background()
	var ours, theirs time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		if _, err := d.Dispatch(ctx, c, nil); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := bare.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
		ours += t1.Sub(t0)
		theirs += time.Since(t1)
	}
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "client-ns/op")
	b.ReportMetric(float64(theirs.Nanoseconds())/float64(b.N), "sdk-ns/op")
	if theirs > 0 {
		b.ReportMetric(float64(ours)/float64(theirs), "ratio")
	}
}

// BenchmarkMCPCallSDK is the bare SDK client's call alone.
func BenchmarkMCPCallSDK(b *testing.B) {
	bare := bareSession(b)
	params := &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bare.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
}
