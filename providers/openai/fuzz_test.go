package openai_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/providers/openai"
)

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// FuzzStream feeds arbitrary response bodies (at most 64 KiB) through the
// client library's decoder and this package's chunk handling. Whatever the
// bytes, Stream returns a *model.ProviderError or a stream that keeps the
// kernel contract: valid items, one terminal, then io.EOF.
func FuzzStream(f *testing.F) {
	for _, body := range transcriptBodies(f) {
		f.Add(body)
	}
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":9223372036854775807}]},\"finish_reason\":\"tool_calls\"}]}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 64<<10 {
			t.Skip()
		}
		client := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			return &http.Response{
				StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
				Body: io.NopCloser(bytes.NewReader(body)), Request: r,
			}, nil
		})}
		p, err := openai.New(openai.Config{APIKey: testKey, BaseURL: "http://fuzz.invalid/v1", HTTPClient: client, MaxAttempts: 1})
		require.NoError(t, err)
		s, err := p.Stream(context.Background(), request(t))
		if err != nil {
			var pe *model.ProviderError
			require.True(t, errors.As(err, &pe), "%T %v", err, err)
			require.Nil(t, s)
			return
		}
		_, err = drain(t, s)
		require.NoError(t, err)
	})
}

// transcriptBodies are the response bodies of the recorded transcripts in
// testdata: the seeds of the stream fuzz targets.
func transcriptBodies(f *testing.F) [][]byte {
	f.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "*.http"))
	var bodies [][]byte
	for _, name := range files {
		raw, err := os.ReadFile(name)
		require.NoError(f, err)
		res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
		require.NoError(f, err)
		body, err := io.ReadAll(res.Body)
		require.NoError(f, err)
		bodies = append(bodies, body)
	}
	return bodies
}
