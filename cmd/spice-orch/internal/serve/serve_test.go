package serve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/spice-orch/spice-orch/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func config(t *testing.T) Config {
	dir := t.TempDir()
	return Config{Addr: "127.0.0.1:0", StorePath: filepath.Join(dir, "runs.db"), DataDir: filepath.Join(dir, "data"),
		Pairs: 1, Queue: 4, MaxConns: 8, Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
}

// A configuration that needs the others to be judged is a *ConfigError,
// said before anything listens.
func TestRunRefusesABadConfigurationWithAConfigError(t *testing.T) {
	for name, edit := range map[string]func(*Config){
		"both NATS options": func(c *Config) { c.NATS, c.EmbeddedNATS = "nats://127.0.0.1:1", t.TempDir() },
		"a bad NATS listen": func(c *Config) { c.EmbeddedNATS, c.NATSListen = t.TempDir(), "127.0.0.1:http" },
		"a bad scheduler":   func(c *Config) { c.Pairs = -1 },
	} {
		cfg := config(t)
		edit(&cfg)
		cfg.Hooks.Ready = func(string) { t.Errorf("%s: the server listened", name) }
		err := Run(t.Context(), cfg)
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), "%s: %v", name, err)
	}
}

// TestS2_EmbeddedNATSListensOnLoopbackOnly: the NATS server serve starts
// asks no client for credentials, and serve's token does not cover it:
// it may listen on a loopback address only, token or not.
func TestS2_EmbeddedNATSListensOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "[::]:0", "example.com:4222"} {
		for _, token := range []string{"", "a-token-of-serve"} {
			cfg := config(t)
			cfg.EmbeddedNATS, cfg.NATSListen, cfg.Token = t.TempDir(), addr, token
			ctx, cancel := context.WithCancel(t.Context())
			cfg.Hooks.Ready = func(string) { t.Errorf("%s: the server listened", addr); cancel() }
			err := Run(ctx, cfg)
			cancel()
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "%s: %v", addr, err)
			require.ErrorContains(t, err, "--nats-listen: ", addr)
			require.ErrorContains(t, err, "loopback", addr)
		}
	}
}

// Run serves the API until its context ends, then closes the store: the
// demo pair it started is recorded there with its terminal.
func TestRunServesUntilItsContextEnds(t *testing.T) {
	cfg := config(t)
	cfg.Demo = true
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan string, 1)
	cfg.Hooks.Ready = func(url string) { ready <- url }
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	var url string
	select {
	case url = <-ready:
	case err := <-done:
		t.Fatalf("Run ended before it listened: %v", err)
	}
	resp, err := http.Get(url + "/v1/pairs")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.True(t, strings.Contains(string(body), "builtin-review"), string(body))
	cancel()
	require.NoError(t, <-done)

	st, err := store.Open(context.Background(), cfg.StorePath)
	require.NoError(t, err)
	defer st.Close()
	pairs, err := st.ListPairs(context.Background(), store.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pairs, 1)
	require.False(t, pairs[0].Ended.IsZero(), "the demo pair ended in the store")
}
