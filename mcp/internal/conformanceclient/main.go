// Command conformanceclient is the client under test of the official MCP
// conformance suite (@modelcontextprotocol/conformance). The suite starts
// a scenario's server, runs this program with the server's URL as its last
// argument and the scenario in MCP_CONFORMANCE_SCENARIO, and judges what
// the server saw. It drives mcp/client exactly as a pair would: connect,
// list and verify the tools, call them.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/mcp/client"
)

// calls names, per scenario, the tool to call and its arguments.
var calls = map[string]struct{ name, args string }{
	"tools_call": {"add_numbers", `{"a":2,"b":3}`},
	"sse-retry":  {"test_reconnection", `{}`},
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: conformanceclient URL")
		os.Exit(2)
	}
	if err := run(os.Getenv("MCP_CONFORMANCE_SCENARIO"), os.Args[len(os.Args)-1]); err != nil {
		fmt.Fprintln(os.Stderr, "conformanceclient:", err)
		os.Exit(1)
	}
}

func run(scenario, url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := client.Connect(ctx, client.Config{Name: "conformance", URL: url})
	if err != nil {
		return err
	}
	defer s.Close()
	c, ok := calls[scenario]
	if !ok {
		return nil
	}
	var t tool.Tool
	for _, x := range s.Tools() {
		if x.Definition().Name() == c.name {
			t = x
		}
	}
	if t == nil {
		return fmt.Errorf("the server lists no tool %q", c.name)
	}
	call, err := tool.NewCall(id.Call("call-1"), c.name, []byte(c.args))
	if err != nil {
		return err
	}
	res, err := t.Execute(ctx, call, nil)
	if err != nil {
		return err
	}
	fmt.Println(res.Content())
	return nil
}
