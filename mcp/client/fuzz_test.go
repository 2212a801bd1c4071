package client

import (
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// FuzzToolList feeds a tools/list result from a server (outside bytes)
// through the verification a Connect does: it never panics, and what it
// accepts are valid kernel definitions whose digests are stable.
func FuzzToolList(f *testing.F) {
	f.Add([]byte(`[{"name":"echo","description":"d","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]`))
	f.Add([]byte(`[{"name":"a b","inputSchema":{}}]`))
	f.Add([]byte(`[{"name":"x","inputSchema":{"type":"object","properties":{"p":{"type":"string"}}}},{"name":"x"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var listed []*sdk.Tool
		if json.Unmarshal(b, &listed) != nil {
			return
		}
		s := &Server{cfg: Config{Name: "fuzz", Path: "/x"}}
		tools, _, err := s.build(listed)
		if err != nil {
			return
		}
		for i, tl := range tools {
			if tl.def.IsZero() || tl.def.Name() != listed[i].Name {
				t.Fatal("accepted an invalid definition")
			}
			d, err := DefinitionDigest(listed[i])
			if err != nil || d != tl.info.Digest {
				t.Fatal("digest not stable")
			}
		}
	})
}

// FuzzResult maps a tools/call result (outside bytes) to the kernel's
// outcome: never a panic, and a result only within the bound.
func FuzzResult(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"hi"}]}`), true)
	f.Add([]byte(`{"content":[{"type":"text","text":"no"}],"isError":true}`), false)
	f.Add([]byte(`{"content":[],"structuredContent":{"a":1}}`), true)
	f.Fuzz(func(t *testing.T, b []byte, mutating bool) {
		var res sdk.CallToolResult
		if json.Unmarshal(b, &res) != nil {
			return
		}
		effect, replay := tool.ReadOnly, tool.Safe
		if mutating {
			effect, replay = tool.Mutating, tool.Unsafe
		}
		def, err := tool.NewDefinition(tool.DefinitionConfig{Name: "t", Effect: effect, Replay: replay})
		if err != nil {
			t.Fatal(err)
		}
		call, err := tool.NewCall(id.Call("c1"), "t", nil)
		if err != nil {
			t.Fatal(err)
		}
		c := callState{t: &Tool{s: &Server{cfg: Config{MaxResultBytes: 1 << 10}}, def: def}, call: call}
		out, err := c.result(&res)
		if err == nil && len(out.Content()) > 1<<10 {
			t.Fatal("a result over the bound")
		}
	})
}
