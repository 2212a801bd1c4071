package host

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/plugins/internal/serve"
	pb "github.com/spice-orch/spice-orch/plugins/pluginpb/v1"
)

func FuzzManifest(f *testing.F) {
	def, _ := tool.NewDefinition(tool.DefinitionConfig{Name: "echo", Effect: tool.ReadOnly, Replay: tool.Safe})
	good := &pb.Manifest{ProtocolVersion: 1, PluginName: "p", PluginVersion: "1", Tools: []*pb.ToolDefinition{serve.ToolDefinition(def)},
		Bounds: &pb.Bounds{MaxRequestBytes: 100}}
	b, _ := proto.Marshal(good)
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m pb.Manifest
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		got, err := VerifyManifest(&m, Config{})
		if err != nil {
			var le *LaunchError
			if !errors.As(err, &le) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(got.Tools) == 0 || got.Bounds.MaxRequestBytes <= 0 || got.Bounds.MaxRequestBytes > DefaultMaxRequestBytes {
			t.Fatalf("accepted %+v", got)
		}
		for _, d := range got.Tools {
			if d.IsZero() {
				t.Fatal("zero definition")
			}
		}
	})
}

func FuzzOutcome(f *testing.F) {
	for _, o := range []*pb.Outcome{
		{CallId: "c1", Outcome: &pb.Outcome_Result{Result: &pb.ToolResult{Content: "ok"}}},
		{CallId: "c1", Outcome: &pb.Outcome_Result{Result: &pb.ToolResult{Problem: &pb.Problem{Code: "not_found"}}}},
		{CallId: "c1", Outcome: &pb.Outcome_Error{Error: &pb.ExecutionError{Certainty: pb.Certainty_CERTAINTY_UNCERTAIN, Problem: &pb.Problem{Code: "io"}}}},
		{CallId: "c1", Outcome: &pb.Outcome_Error{Error: &pb.ExecutionError{Certainty: pb.Certainty_CERTAINTY_DEFINITIVE,
			RetryAdvice: pb.RetryAdvice_RETRY_ADVICE_ALLOWED, RetryAfterMillis: 5, Problem: &pb.Problem{Code: "busy"}}}},
	} {
		b, _ := proto.Marshal(o)
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, mutating bool) {
		var o pb.Outcome
		if proto.Unmarshal(b, &o) != nil {
			return
		}
		cfg := tool.DefinitionConfig{Name: "t", Effect: tool.ReadOnly, Replay: tool.Safe}
		if mutating {
			cfg.Effect, cfg.Replay = tool.Mutating, tool.Unsafe
		}
		def, _ := tool.NewDefinition(cfg)
		c, _ := tool.NewCall("c1", "t", nil)
		cs := &callState{t: &Tool{p: &Plugin{}, def: def}, ctx: context.Background(), cctx: context.Background(), call: c}
		res, err := cs.outcome(&o)
		// Whatever the bytes, the canonical dispatcher accepts the outcome
		// as a valid one (never a protocol violation of the kernel's).
		d, _ := tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{fixed{def: def, res: res, err: err}}})
		_, derr := d.Dispatch(context.Background(), c, nil)
		var ee *tool.ExecutionError
		if derr != nil && errors.As(derr, &ee) && ee.Problem().Code() == "tool_protocol_violation" {
			t.Fatalf("outcome broke K7: %v / %v", res, err)
		}
	})
}

type fixed struct {
	def tool.Definition
	res tool.Result
	err error
}

func (f fixed) Definition() tool.Definition { return f.def }
func (f fixed) Execute(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
	return f.res, f.err
}
