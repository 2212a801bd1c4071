package openai_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

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

// answerBody is a text answer of n content chunks as OpenAI streams it (the
// shape of testdata/text.http): a role chunk, n content chunks, a finish
// chunk and a usage chunk, then [DONE]. Its chunks are what
// BenchmarkOpenAIStream counts.
func answerBody(n int) (body []byte, chunks int) {
	const head = `data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_06737a9306","choices":[`
	var b bytes.Buffer
	b.WriteString(head + `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	for i := range n {
		fmt.Fprintf(&b, head+`{"index":0,"delta":{"content":" word%d"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", i)
	}
	b.WriteString(head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n")
	b.WriteString(head + `],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes(), n + 3
}

// sseClient answers every request with body, from memory, at the
// http.RoundTripper: no server runs in the process, so the benchmarks
// count the client's allocations only. Everything above the transport is
// measured as a real request makes it (the provider, openai-go's request
// config, auth, headers and middleware, http.Client's redirect and header
// handling, the response body's reading); what is left out is the
// transport's own work (connection pool, writing the request, HTTP
// framing), the same for the provider and openai-go's own client, and an
// httptest.Server in the same process would add its allocations to the
// counts.
func sseClient(body []byte) *http.Client {
	h := http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}
	return &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
	})}
}

// BenchmarkOpenAIStream is one streamed answer of chunks=N content chunks
// through the provider (request built and sent, every chunk decoded into
// kernel items), against a local SSE body (see sseClient for what is
// measured). ns/chunk and allocs/chunk divide the whole request by its
// chunks, so chunks=10 shows the request's fixed cost and chunks=200 the
// cost of a chunk.
func BenchmarkOpenAIStream(b *testing.B) {
	for _, n := range []int{10, 200} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			body, chunks := answerBody(n)
			p, err := openai.New(openai.Config{APIKey: testKey, BaseURL: "http://bench.invalid/v1", HTTPClient: sseClient(body)})
			if err != nil {
				b.Fatal(err)
			}
			req := request(b)
			ctx := context.Background()
			perChunk(b, chunks, func() {
				s, err := p.Stream(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				items := 0
				for {
					if _, err := s.Recv(); err != nil {
						break
					}
					items++
				}
				_ = s.Close()
				if items != n+1 { // n deltas and the completion
					b.Fatalf("%d items", items)
				}
			})
		})
	}
}

// BenchmarkOpenAIStreamRaw reads the same bodies with openai-go's own
// streaming client (NewStreaming, then Next and Current to the end): the
// library's cost, which BenchmarkOpenAIStream is compared with.
func BenchmarkOpenAIStreamRaw(b *testing.B) {
	for _, n := range []int{10, 200} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			body, chunks := answerBody(n)
			chat := oai.NewChatCompletionService(option.WithBaseURL("http://bench.invalid/v1"),
				option.WithHTTPClient(sseClient(body)), option.WithAPIKey(testKey), option.WithMaxRetries(0))
			params := oai.ChatCompletionNewParams{
				Model:    "gpt-4o-mini",
				Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Thanks. And Paris?")},
			}
			ctx := context.Background()
			perChunk(b, chunks, func() {
				s := chat.NewStreaming(ctx, params)
				got := 0
				for s.Next() {
					_ = s.Current()
					got++
				}
				if err := s.Err(); err != nil || got != chunks {
					b.Fatalf("%d chunks, %v", got, err)
				}
				_ = s.Close()
			})
		})
	}
}

// perChunk runs one streamed request per iteration and reports its cost
// per chunk.
func perChunk(b *testing.B, chunks int, run func()) {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ReportAllocs()
	for b.Loop() {
		run()
	}
	runtime.ReadMemStats(&m1)
	n := float64(b.N * chunks)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/chunk")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/n, "allocs/chunk")
}
