package tool_test

import (
	"context"
	"testing"

	"github.com/spice-orch/spice-orch/kernel/tool"
)

type benchTool struct {
	def tool.Definition
	res tool.Result
}

func (b *benchTool) Definition() tool.Definition { return b.def }

func (b *benchTool) Execute(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
	return b.res, nil
}

func benchDispatch(b *testing.B, guards ...tool.Guard) {
	bt := &benchTool{def: readOnly(b, "read"), res: result(b, "c1", "ok")}
	others := []tool.Tool{bt}
	for _, n := range []string{"alpha", "beta", "gamma", "zeta"} {
		others = append(others, okTool(readOnly(b, n)))
	}
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: others, Guards: guards})
	if err != nil {
		b.Fatal(err)
	}
	c := call(b, "c1", "read")
	ctx := context.Background()
	rec := &recorder{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Dispatch(ctx, c, rec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDispatch(b *testing.B) { benchDispatch(b) }

func BenchmarkDispatchGuarded(b *testing.B) {
	benchDispatch(b,
		tool.DecideFunc(func(context.Context, tool.Definition, tool.Call) tool.Decision { return tool.Allow() }),
		tool.ObserveFunc(func(context.Context, tool.Definition, tool.Call, tool.Observation) {}))
}
