// Command conformanceclient is the client under test of the official MCP
// conformance suite (@modelcontextprotocol/conformance). The suite starts
// a scenario's server, runs this program with the server's URL as its last
// argument and the scenario in MCP_CONFORMANCE_SCENARIO, and judges what
// the server saw. It drives mcp/client exactly as a pair would: connect,
// list and verify the tools, call them.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/mcp/client"
)

// calls names, per scenario, the tool to call and its arguments; every
// auth/ scenario calls test-tool.
var calls = map[string]struct{ name, args string }{
	"tools_call": {"add_numbers", `{"a":2,"b":3}`},
	"sse-retry":  {"test_reconnection", `{}`},
}

// redirectURL is where the suite's authorization server sends the code.
const redirectURL = "http://localhost:3000/callback"

// fetchCode plays the person at the authorization server: the suite's
// server answers the authorization request at once with a redirect that
// carries the code.
func fetchCode(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, "GET", args.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return nil, err
	}
	q := loc.Query()
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}

// oauth is the authorization of an auth/ scenario: client ID metadata
// document, dynamic registration, or the pre-registered client that the
// suite's context names.
func oauth() (auth.OAuthHandler, error) {
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL: redirectURL, AuthorizationCodeFetcher: fetchCode,
		ClientIDMetadataDocumentConfig: &auth.ClientIDMetadataDocumentConfig{URL: "https://conformance-test.local/client-metadata.json"},
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{RedirectURIs: []string{redirectURL}},
		},
	}
	var sc struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" && json.Unmarshal([]byte(raw), &sc) == nil && sc.ClientID != "" && sc.ClientSecret != "" {
		cfg.PreregisteredClient = &oauthex.ClientCredentials{ClientID: sc.ClientID,
			ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: sc.ClientSecret}}
	}
	return auth.NewAuthorizationCodeHandler(cfg)
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

func run(scenario, serverURL string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := client.Config{Name: "conformance", URL: serverURL}
	c, ok := calls[scenario]
	if strings.HasPrefix(scenario, "auth/") {
		h, err := oauth()
		if err != nil {
			return err
		}
		cfg.OAuth = h
		c, ok = struct{ name, args string }{"test-tool", `{}`}, true
	}
	s, err := client.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
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
