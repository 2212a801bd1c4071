# Developer and CI entry points. `make test` is what CI runs (.ci/run).

GO           ?= go
GOFLAGS      ?= -buildvcs=false
export GOFLAGS

TEST_TIMEOUT ?= 15m
FUZZTIME     ?= 10s
BENCH_COUNT  ?= 5
# The benchmarks of DESIGN.md's performance table. Packages that do not
# have them yet simply run none.
BENCHMARKS   ?= BenchmarkEngineTextRun|BenchmarkEngineToolRound|BenchmarkEngineCancel|BenchmarkPairRelay|BenchmarkPairRelayCold|BenchmarkPairRelayLive|BenchmarkSchedulerThroughput|BenchmarkEventAppend|BenchmarkEventSubscribeFanout|BenchmarkStoreObserver|BenchmarkPluginCall|BenchmarkPluginLaunch|BenchmarkPluginActivate|BenchmarkCompiledEcho

.PHONY: test fmt-check vet lint archtest race bench fuzz buf

## test: formatting, vet, the architecture tests, then every test with -race.
test: fmt-check vet archtest buf race

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

race:
	$(GO) test -race -shuffle=on -timeout $(TEST_TIMEOUT) ./...

## bench: the performance-table benchmarks, BENCH_COUNT runs each (compare
## medians). -p 1: go test runs packages in parallel otherwise, and on two
## cores one package's benchmark would take CPU from another's.
bench:
	$(GO) test -p 1 -run '^$$' -bench '^($(BENCHMARKS))$$' -benchmem -count $(BENCH_COUNT) -timeout $(TEST_TIMEOUT) ./...

## fuzz: every FuzzXxx target in the module, one at a time, FUZZTIME each
## (.ci/fuzz; it tells a failing input from Go 1.26's fuzztime race).
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./.ci/fuzz

## buf: the plugin/v1 protocol is frozen: buf lint (STANDARD), buf breaking
## (FILE) against the released image plugins/proto/v1.binpb, and the
## committed generated code equals a fresh generation. Buf and the
## generators run through the Go module proxy at pinned versions.
BUF ?= $(GO) run github.com/bufbuild/buf/cmd/buf@v1.75.0
buf:
	cd plugins && $(BUF) lint
	cd plugins && $(BUF) breaking --against proto/v1.binpb
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	cd plugins && $(BUF) generate -o "$$tmp" && \
	if ! diff -r "$$tmp/pluginpb" pluginpb; then \
		echo "plugins/pluginpb is stale: run 'cd plugins && $(BUF) generate' and commit"; exit 1; fi
