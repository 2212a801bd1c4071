package serve

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spice-orch/spice-orch/functool"
	"github.com/spice-orch/spice-orch/kernel/tool"
	pb "github.com/spice-orch/spice-orch/plugins/pluginpb/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func echo() tool.Tool {
	return functool.Must(functool.Config{Name: "echo", Effect: tool.ReadOnly, Replay: tool.Safe},
		func(_ context.Context, a struct {
			Text string `json:"text"`
		}) (string, error) {
			return a.Text, nil
		})
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestP2_PluginWithoutAValidSecretRefusesToServe(t *testing.T) {
	for _, in := range []string{"", "\n", "short\n", strings.Repeat("A", 64) + "\n", strings.Repeat("a", 64)} {
		var out strings.Builder
		err := Run(t.Context(), Options{Name: "p", Version: "1", Tools: []tool.Tool{echo()},
			Stdin: strings.NewReader(in), Stdout: &out,
			Getenv: env(map[string]string{"SPICE_PLUGIN_PROTOCOLS": "1", "SPICE_PLUGIN_DIR": t.TempDir()})})
		require.ErrorIs(t, err, ErrNoSecret)
		require.Empty(t, out.String(), "nothing on stdout")
	}
}

func TestP3_PluginWithoutACommonProtocolRefusesToServe(t *testing.T) {
	for _, v := range []string{"", "2", "0,2", "x"} {
		var out strings.Builder
		err := Run(t.Context(), Options{Name: "p", Version: "1", Tools: []tool.Tool{echo()},
			Stdin: strings.NewReader(strings.Repeat("a", 64) + "\n"), Stdout: &out,
			Getenv: env(map[string]string{"SPICE_PLUGIN_PROTOCOLS": v, "SPICE_PLUGIN_DIR": t.TempDir()})})
		require.ErrorIs(t, err, ErrNoProtocol)
		require.Empty(t, out.String())
	}
}

func TestP2_PluginPrintsOneLineAndStopsAtStdinEOF(t *testing.T) {
	dir, err := newShortDir(t)
	require.NoError(t, err)
	pr, pw := io.Pipe()
	var out strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Options{Name: "p", Version: "1", Tools: []tool.Tool{echo()},
			Stdin: pr, Stdout: &out,
			Getenv: env(map[string]string{"SPICE_PLUGIN_PROTOCOLS": "1", "SPICE_PLUGIN_DIR": dir})})
	}()
	_, err = pw.Write([]byte(strings.Repeat("a", 64) + "\n"))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	require.NoError(t, <-done)
	require.Regexp(t, `^SPICE-PLUGIN\|1\|unix\|`+dir+`/plugin.sock\|[0-9a-f]{64}\n$`, out.String())
}

// newShortDir makes a directory with a path short enough for a socket.
func newShortDir(t *testing.T) (string, error) {
	dir, err := os.MkdirTemp("", "sp-")
	if err == nil {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	return dir, err
}

func TestP3_DescribeWithoutACommonVersionFailsPrecondition(t *testing.T) {
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{echo()}})
	require.NoError(t, err)
	s := &server{o: Options{Name: "p", Version: "1"}, d: d}
	for _, vs := range [][]uint32{nil, {0}, {2}, {0, 2}} {
		_, err := s.Describe(t.Context(), &pb.DescribeRequest{HostProtocolVersions: vs})
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", vs)
	}
	resp, err := s.Describe(t.Context(), &pb.DescribeRequest{HostProtocolVersions: []uint32{2, 1}})
	require.NoError(t, err)
	require.Equal(t, uint32(1), resp.GetManifest().GetProtocolVersion())
}
