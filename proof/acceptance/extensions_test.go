package acceptance

import "testing"

// The two extension points of the suite. Each returns nil until its part
// has landed on main, and the ledger lists it as not yet proven; none is
// stubbed or counted as passing.

// runtimeToolPart is the runtime-tool part: when plugins/ lands, build the
// Go fixture plugin (go build into t.TempDir()), pin its SHA-256, start a
// generation through the plugin host, and return its tools with a
// reviewer transcript (Ollama wire format) that calls one of them.
func runtimeToolPart(t *testing.T) *RuntimeToolPart {
	t.Helper()
	return nil
}

// alternateClient is the alternate-client part: when server/ lands, start
// `serve` on 127.0.0.1:0 over the pair and return a plain HTTP client of
// its SSE stream of the pair timeline.
func alternateClient(t *testing.T) AlternateClient {
	t.Helper()
	return nil
}
