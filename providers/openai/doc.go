// Package openai owns a model.Provider for the OpenAI Chat Completions API
// and the servers that speak its wire format (vLLM, llama.cpp server,
// Ollama, OpenRouter), built on the official github.com/openai/openai-go/v3
// client with streaming.
//
// # Requests
//
// A kernel request becomes one streaming chat request: the system prompt as
// a system message, the history in order (a tool message with n results
// becomes n "tool" messages), and each tool definition as a function tool
// whose JSON schema is sent verbatim. Tool names may contain '.', which the
// OpenAI API rejects, so a name is sent with every '.' replaced by '_' and
// mapped back when the model calls it; two offered tools that would collide
// are refused before anything is sent. A problem on a tool result is shown
// to the model as "error (code): message" before the content. Stream
// options ask for usage; Config adds temperature and the output token
// limit. Request metadata is never sent.
//
// The body is written by this package (body.go) rather than through the
// client library's params types, whose reflection cost about 200
// allocations a request; the library still sends it, with its auth, base
// URL, headers and options. Its encoding is held equal, as JSON, to the
// library's own by TestRequestBodyMatchesTheLibrary and FuzzRequestBody.
//
// # Streams
//
// Text deltas are emitted as they arrive (a delta above
// bound.MaxTextDeltaBytes is split at a rune boundary, never cut). Tool
// calls arrive in fragments keyed by index; they are assembled and emitted,
// in order, when the model reports why it finished. After the server ends
// the stream, a Completed item carries the usage and metadata (namespace
// "openai": id, model, finish_reason, and refusal when the model refused).
// Reasoning fields some servers add are ignored.
//
// A stream's Ready method reports whether its next Recv returns without
// waiting for the model: an item is pending (one chunk may yield several),
// the stream has ended, or a complete event has already been received.
// The library's decoder is handed the body one line per Read, so it never
// holds more than the event it returned, and the rest of what arrived is
// where Ready can look at it without reading the network; the events
// already received are decoded by Ready itself, so an event that yields
// no item is not taken for one that does. A decorator (providers/coalesce)
// uses it to merge the text deltas a caller that fell behind finds at
// hand. FuzzReadyNeverWaits holds Ready to never reading the body, and to
// never changing what Recv returns. If the library's own event-stream
// decoder is replaced (ssestream.RegisterDecoder), Ready only reports
// items already pending.
//
// Chunks are decoded by hand (chunk.go), strings included: a string
// without escapes is used in place, and one with escapes is unescaped into
// a reused buffer, invalid UTF-8 and lone surrogates becoming U+FFFD as
// with encoding/json. kernel/eventlog's ObjectReader has an unescaper too,
// kept apart on purpose: it is strict (a stored event that is not valid
// canonical JSON is refused, not repaired), it is not exported, and the
// kernel's API may not grow for an adapter. encoding/json's Unmarshal
// into a string gives this package's semantics, but measured on a chunk
// whose content has escapes (BenchmarkChunkDecodeEscaped, alternating
// rounds) it took 2.1 to 2.8 times as long and 4 allocations where the
// hand-written path takes none, which would break the streamed chunk's
// target of at most 10 allocations.
//
// Every kernel bound is checked while the bytes arrive, before anything is
// buffered past it: text per operation, text plus arguments per message,
// tool calls per operation, arguments per call, and the total response
// size (Config.MaxResponseBytes). A stream that would break one ends with a
// Failed item naming the field and limit; nothing is ever truncated.
//
// # Errors and retries
//
// The provider reads the response up to its first chunk inside Stream.
// Anything that goes wrong until then is a *model.ProviderError from
// Stream: 400, 401, 403, 404, 413 and 422 are not retryable; 408, 409, 429
// (except insufficient_quota), 5xx, connection failures and the provider's
// own timeout are. Stream itself retries retryable errors, at most
// Config.MaxAttempts attempts in all, waiting as the server's Retry-After
// (or retry-after-ms) says, or with jittered exponential backoff when it
// says nothing. When the server asks for a longer wait than
// Config.MaxRetryWait, Stream does not wait: it returns the error with the
// advice (bounded by model.MaxRetryAfter) for the caller to follow. The
// client library's own retries are off, so this policy is the only one.
//
// Once a chunk has arrived, failures are never retried: they end the stream
// with a Failed item (upstream_error, malformed_chunk, connection_lost,
// timeout, response_too_large, stream_oversized, invalid_tool_call,
// stream_truncated, empty_response). When the caller's context is
// cancelled, Recv returns the context's error promptly and the HTTP
// response is closed.
//
// # Secrets
//
// The API key is sent only in the Authorization header. It never appears in
// items, metadata or errors: server text (streamed text, tool calls, IDs,
// error messages, types and codes) is copied only after every occurrence
// of the key is replaced, in any case and in the encodings a server may
// quote it in (base64 and base64url at any alignment, hex,
// percent-encoding). Streamed text that may begin the key is held back
// until the next chunk shows whether it does, so a key split over chunks
// is caught too. Errors from the client library (which hold the HTTP
// request and its headers) are not kept, and Config and Provider format
// themselves without the key. A base URL with a query string is refused,
// not cut.
//
// This package must not import another adapter (tools, stores, other
// providers) or anything above layer 3. It knows nothing of runs, events or
// how a caller reacts to a failure; of kernel/eventlog it uses only the
// JSON string encoder, so that a request's strings are encoded as events
// are.
package openai
