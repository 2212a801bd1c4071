package archtest

import "github.com/spice-orch/spice-orch/proof/boundary"

// Unit is one row of the layer table: a folder of the module and what the
// packages in it may import.
type Unit struct {
	// Dir is the folder, slash-separated and relative to the module root.
	// A package belongs to the unit with the longest Dir that contains it.
	Dir string
	// Level is the layer number. Test files may import any unit of a lower
	// level. Zero means outside the table (archtest).
	Level int
	// MayImport names the other units (by Dir) that non-test files may
	// import. A unit may always import its own packages, unless Isolated.
	MayImport []string
	// ThirdParty allows imports from modules other than this one and the
	// standard library.
	ThirdParty bool
	// Isolated makes every subfolder its own adapter: providers/a may import
	// providers/a/... and providers/internal/..., not providers/b.
	Isolated bool
	// Kernel marks the kernel: its files are held to kernel-imports,
	// kernel-deps and kernel-words instead of layer-imports.
	Kernel bool
	// Unconstrained exempts the unit from every import rule (archtest).
	Unconstrained bool
}

// Layers returns the layer table, the source of the one in
// docs/architecture.md (TestArchitectureDocMatchesTheLayerTable holds
// that page to it). Imports point down only; "everything below" is spelled
// out so the table reads as data.
func Layers() []Unit {
	return []Unit{
		// Benchmarks of how costs scale (their test files), and the
		// program that plots them: measurement only, nothing imports it.
		{Dir: "internal", Level: 9, MayImport: []string{"proof", "scheduler", "orchestrator", "workers", "handoff", "providers", "tools", "store", "idempotency", "kernel"}},
		// The command: cli (flags, output, exit codes) and the packages
		// under internal/ it composes with (spec, render, compose,
		// remotespec, serve, jobworker, otelsetup, pluginlog, mcplog, sidelog).
		// One unit: they are one program's parts, listed in the package
		// map.
		{Dir: "cmd/spice-orch", Level: 9, ThirdParty: true,
			MayImport: []string{"proof", "server", "telemetry", "jetstream", "scheduler", "job", "orchestrator", "workers", "handoff", "providers", "tools", "store", "plugins", "mcp", "toolgen", "functool", "idempotency", "pairdiff", "kernel"}},
		// proof sits above server: its alternate client is the real serve
		// SSE API.
		{Dir: "proof", Level: 8, ThirdParty: true,
			MayImport: []string{"server", "scheduler", "orchestrator", "workers", "handoff", "providers", "tools", "store", "plugins", "functool", "idempotency", "kernel"}},
		// The HTTP API, SSE streams and embedded web UI over a job backend.
		{Dir: "server", Level: 7,
			MayImport: []string{"jetstream", "scheduler", "job", "orchestrator", "workers", "handoff", "providers", "tools", "store", "plugins", "functool", "idempotency", "kernel"}},
		// "orchestrator and below": layer 3 adapters are below layer 6.
		{Dir: "scheduler", Level: 6, ThirdParty: true,
			MayImport: []string{"job", "orchestrator", "workers", "handoff", "providers", "tools", "store", "plugins", "functool", "idempotency", "kernel"}},
		// The JetStream job backend: pair jobs, their state and their
		// timelines on NATS JetStream, played by worker processes.
		{Dir: "jetstream", Level: 6, ThirdParty: true,
			MayImport: []string{"job", "orchestrator", "workers", "handoff", "providers", "tools", "store", "plugins", "functool", "idempotency", "kernel"}},
		// OpenTelemetry of runs and pairs: it reads pair timelines, so the
		// layers below never import OpenTelemetry.
		{Dir: "telemetry", Level: 6, ThirdParty: true,
			MayImport: []string{"orchestrator", "workers", "handoff", "providers", "tools", "store", "plugins", "functool", "idempotency", "kernel"}},
		{Dir: "orchestrator", Level: 5, MayImport: []string{"workers", "handoff", "idempotency", "kernel"}},
		// The job model every job backend shares: IDs, attempts, states,
		// reports and the backend interface; no transport, no pair.
		{Dir: "job", Level: 5, MayImport: []string{"kernel"}},
		{Dir: "workers", Level: 4, MayImport: []string{"kernel"}},
		{Dir: "handoff", Level: 4, MayImport: []string{"kernel"}},
		{Dir: "providers", Level: 3, ThirdParty: true, Isolated: true, MayImport: []string{"kernel"}},
		{Dir: "tools", Level: 3, ThirdParty: true, Isolated: true, MayImport: []string{"functool", "idempotency", "kernel"}},
		{Dir: "store", Level: 3, ThirdParty: true, Isolated: true, MayImport: []string{"kernel"}},
		// plugins: the runtime tool host, its protocol and the Go plugin
		// SDK. One adapter (not Isolated): host and sdk share the
		// generated protocol package and the handshake.
		{Dir: "plugins", Level: 3, ThirdParty: true, MayImport: []string{"functool", "idempotency", "proctree", "toolgen", "kernel"}},
		// mcp: MCP servers as runtime tools, a client on the official Go
		// SDK beside the plugin host. Its own adapter: it imports no
		// plugins package.
		{Dir: "mcp", Level: 3, ThirdParty: true, MayImport: []string{"functool", "idempotency", "proctree", "toolgen", "kernel"}},
		// proctree: starting a child so that its whole process tree can be
		// ended, shared by the plugin host and the MCP client.
		{Dir: "proctree", Level: 2},
		// toolgen: generations of runtime tools behind leased plans
		// (activation for future leases, drains, bounds), shared by the
		// plugin host and the MCP servers; it knows no process or protocol.
		{Dir: "toolgen", Level: 2, MayImport: []string{"kernel"}},
		// functool: typed function tools over the kernel's tool contract,
		// shared by compiled tools and plugin tools alike.
		{Dir: "functool", Level: 2, MayImport: []string{"kernel"}},
		// idempotency: a tool call's key, derived where the pair and run
		// are known and read where the call runs (compiled tools, the
		// plugin host), through the call's context.
		{Dir: "idempotency", Level: 2, MayImport: []string{"kernel"}},
		// pairdiff: the first divergence of two recorded timelines, and
		// golden timeline files for tests. It reads canonical JSON lines
		// and knows no pair type, so everything above can use it.
		{Dir: "pairdiff", Level: 2, MayImport: []string{"kernel"}},
		{Dir: "kernel", Level: 1, Kernel: true},
		{Dir: "archtest", Unconstrained: true},
	}
}

// KernelStd returns the standard-library packages that non-test kernel files
// may import: pure computation, encoding, synchronisation and time values.
// Everything else is out: I/O and the operating system (os, io/fs, syscall,
// net/..., os/exec), reflection and unsafe (no reflection-based dispatch),
// randomness (identifiers and clocks are injected, K30), global logging and
// plugins. A package joins this list by a reviewed change here.
func KernelStd() []string {
	return []string{
		"bufio",
		"bytes",
		"cmp",
		"container/heap",
		"container/list",
		"container/ring",
		"context",
		"crypto/sha256",
		"crypto/subtle",
		"encoding/base64",
		"encoding/binary",
		"encoding/hex",
		"encoding/json",
		"errors",
		"fmt",
		"hash",
		"io",
		"iter",
		"maps",
		"math",
		"math/bits",
		"runtime",
		"runtime/debug",
		"slices",
		"sort",
		"strconv",
		"strings",
		"sync",
		"sync/atomic",
		"time",
		"unicode",
		"unicode/utf16",
		"unicode/utf8",
		"unique",
	}
}

// TestLibraries returns the module paths that test files of every layer may
// import. A path matches itself and the packages below it.
func TestLibraries() []string {
	return []string{
		"github.com/stretchr/testify",
		"go.uber.org/goleak",
	}
}

// ForbiddenWords returns the words the kernel must not use: the
// multi-agent concepts it must never learn. Plurals and derived forms are matched too;
// see wordForms.
func ForbiddenWords() []string { return boundary.ForbiddenWords() }

// Exception excuses the violations of one rule in one file about one
// subject (an import path or a forbidden word). Every exception states why
// it exists; one that no longer excuses anything is itself reported.
type Exception struct {
	Rule    string
	File    string // as in Violation.File
	Subject string // as in Violation.Subject
	Reason  string
}

// Exceptions returns the exceptions that apply to this module.
func Exceptions() []Exception {
	// None today. An entry needs a reason; one that excuses nothing fails.
	return nil
}

// Default returns the configuration that checks the module at root, whose
// module path is module, against the tables of this file.
func Default(root, module string) Config {
	return Config{
		Root:           root,
		Module:         module,
		Units:          Layers(),
		KernelStd:      KernelStd(),
		TestLibraries:  TestLibraries(),
		ForbiddenWords: ForbiddenWords(),
		Exceptions:     Exceptions(),
	}
}
