package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/tool"
)

// httpServer serves the fixture's tools over streamable HTTP on loopback.
func httpServer(t *testing.T) string {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return newFixtureServer("") }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestM1_HTTPServerIsUnpinnedAndItsToolsMutatingUnlessDeclared(t *testing.T) {
	url := httpServer(t)
	s := connect(t, Config{Name: "remote", URL: url,
		Tools: map[string]ToolConfig{"fail": {Effect: tool.ReadOnly, Replay: tool.Safe}}})
	require.False(t, s.Pinned())
	for _, in := range s.Info() {
		require.False(t, in.Pinned, in.Name)
		switch in.Name {
		case "echo":
			// readOnlyHint of an unpinned server is not trusted.
			require.Equal(t, tool.Mutating, in.Effect)
			require.Equal(t, tool.Unsafe, in.Replay)
			require.Equal(t, FromDefault, in.From)
		case "fail":
			require.Equal(t, tool.ReadOnly, in.Effect)
			require.Equal(t, FromDeclared, in.From)
		}
	}
	res, err := exec1(t, context.Background(), s, "echo", map[string]string{"text": "over http"})
	require.NoError(t, err)
	require.Equal(t, "over http", res.Content())
}

func TestM4_OAuthAuthorizesOnlyAURL(t *testing.T) {
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		RedirectURL: "http://localhost:3000/callback",
		AuthorizationCodeFetcher: func(context.Context, *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			return nil, errors.New("no person here")
		},
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{RedirectURIs: []string{"http://localhost:3000/callback"}},
		},
	})
	require.NoError(t, err)
	cfg := fixtureConfig(t)
	cfg.OAuth = h
	_, err = Connect(context.Background(), cfg)
	require.ErrorIs(t, err, ErrConfig)
}
