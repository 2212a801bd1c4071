package openai_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/spice-orch/spice-orch/providers/openai"
)

// BenchmarkTextStream measures one text answer (testdata/text.http, seven
// chunks) through the client library and this package, without a network.
func BenchmarkTextStream(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("testdata", "text.http"))
	if err != nil {
		b.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	client := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: res.Header, Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
	})}
	p, err := openai.New(openai.Config{APIKey: testKey, BaseURL: "http://bench.invalid/v1", HTTPClient: client})
	if err != nil {
		b.Fatal(err)
	}
	req := request(b)
	b.ReportAllocs()
	for b.Loop() {
		s, err := p.Stream(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := s.Recv(); err != nil {
				break
			}
		}
		_ = s.Close()
	}
}
