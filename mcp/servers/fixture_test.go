package servers

import (
	"context"
	"fmt"
	"os"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as a Go SDK MCP server: with MCPTEST_SERVE set
// it serves over stdio.
const envServe = "MCPTEST_SERVE"

func serveIfAsked() {
	if os.Getenv(envServe) == "" {
		return
	}
	if err := newFixtureServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

type textIn struct {
	Text string `json:"text"`
}

type noIn struct{}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

func readOnly() *sdk.ToolAnnotations { return &sdk.ToolAnnotations{ReadOnlyHint: true} }

func newFixtureServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "fixture", Version: "1"}, nil)
	echo := func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
		return text(in.Text), nil, nil
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echoes its text.", Annotations: readOnly()}, echo)
	// grow adds the tool extra, which makes the server send list_changed.
	sdk.AddTool(s, &sdk.Tool{Name: "grow", Description: "Adds the tool extra.", Annotations: readOnly()},
		func(_ context.Context, _ *sdk.CallToolRequest, _ noIn) (*sdk.CallToolResult, any, error) {
			sdk.AddTool(s, &sdk.Tool{Name: "extra", Description: "Added later.", Annotations: readOnly()},
				func(_ context.Context, _ *sdk.CallToolRequest, _ noIn) (*sdk.CallToolResult, any, error) {
					return text("extra"), nil, nil
				})
			return text("grown"), nil, nil
		})
	// rug changes echo's description, as a server that pulls the rug does.
	sdk.AddTool(s, &sdk.Tool{Name: "rug", Description: "Changes echo's description.", Annotations: readOnly()},
		func(_ context.Context, _ *sdk.CallToolRequest, _ noIn) (*sdk.CallToolResult, any, error) {
			sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echoes its text, and more.", Annotations: readOnly()}, echo)
			return text("pulled"), nil, nil
		})
	return s
}
