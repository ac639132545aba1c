# The whole test suite: the library and the scripts (fast, on miniredis and a
# redis-server the tests start), then every module that tests against real
# servers, integrates, or measures. `make test` is what CI runs.
GO ?= go
# bash with pipefail: a go test piped into testsummary fails the target
# when go test fails, whatever testsummary made of its output.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
STATICCHECK ?= staticcheck
# Every Go module of the repository; nested modules keep their dependencies
# (OpenTelemetry, gRPC, testcontainers, the peer) out of the library's go.sum.
# go.work lists the same, so that each is built against the others as they
# are here (a test in internal/modules checks both lists).
MODULES := . otelrate grpclimit integration_test bench
# The lowest Go release the published modules (., grpclimit, otelrate)
# build and pass their tests on: the go directive of their go.mod files,
# which a test in internal/modules checks. make floor tests on it.
GO_FLOOR := 1.22.0

.PHONY: unit test floor check generate tidy release-dryrun

# The loop to run while working: the root module's tests with -short, on
# miniredis only (no real server), without -race, the long
# tables left to make test. Under a minute on an idle 2-core machine.
unit:
	$(GO) test -short -count=1 ./...

# CI's gate. Every part runs, whatever failed before it; the end lists
# every test a missing tool skipped, loudly (internal/testsummary reads go
# test -json), then the parts that failed, and fails if any did. The Node
# snippet's client (ioredis) is installed when npm is there.
# integration_test runs twice: on redis-server, then with every fresh
# server valkey-server.
test:
	@if command -v npm >/dev/null 2>&1 && [ ! -d examples/node/node_modules/ioredis ]; then \
	  echo "== npm ci --prefix examples/node (ioredis, for the Node snippet's test)"; \
	  npm ci --prefix examples/node --no-audit --no-fund --loglevel=error || \
	    echo "npm ci failed: the Node snippet's test will be skipped"; \
	fi
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(GO) build -o "$$tmp/testsummary" ./internal/testsummary && \
	failed=() && \
	part() { name=$$1; shift; echo "== $$name"; "$$@" || failed+=("$$name"); } && \
	gotest() { (cd "$$1" && shift && $(GO) test -json "$$@") | "$$tmp/testsummary" -skips "$$tmp/skips"; } && \
	for m in $(MODULES); do \
	  part "go test $$m" gotest $$m -race -shuffle=on -count=1 -timeout 20m ./...; \
	done && \
	valkey() { REDISRATE_SERVER=valkey-server gotest integration_test -race -shuffle=on -count=1 ./...; } && \
	if command -v valkey-server >/dev/null || [ "$$CI" = true ]; then \
	  part "go test integration_test on Valkey (the same tests, valkey-server as every fresh server)" valkey; \
	else echo "SKIPPED: valkey-server is not installed (bash .ci/run installs it)"; fi && \
	part "go test . (allocation counts, which -race changes)" $(GO) test -count=1 -run 'Alloc' . && \
	part "go test ./scripts: the long tables whole (a share under -race), 10^6 calls of the range against math/big" $(GO) test -count=1 -timeout 30m -run 'TestGuarantee12$$|TestFastCopyDecidesAsGeneral|TestDifferentialRange$$' ./scripts && \
	part "go test on Go $(GO_FLOOR), the published modules' minimum (make floor)" $(MAKE) --no-print-directory floor && \
	"$$tmp/testsummary" -report -skips "$$tmp/skips" && \
	if [ $${#failed[@]} -gt 0 ]; then printf 'FAILED: %s\n' "$${failed[@]}"; exit 1; fi

# The library's and the middleware's tests (the root module, grpclimit,
# otelrate) on GO_FLOOR, the Go release their go.mod files declare, which
# the go command downloads (GOTOOLCHAIN): what a user on that release
# builds. -short and no -race, to keep it quick; make test runs it too. The
# workspace here lists only those three modules: integration_test and the
# bench, which users never build, may need a later Go.
floor:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	export GOWORK="$$tmp/go.work" GOTOOLCHAIN=go$(GO_FLOOR) && \
	v=$$(awk '$$1 == "github.com/redisrate/redisrate" { print $$2 }' grpclimit/go.mod) && \
	printf 'go $(GO_FLOOR)\n\nuse (\n\t%s\n\t%s/grpclimit\n\t%s/otelrate\n)\n\nreplace github.com/redisrate/redisrate %s => %s\n' \
	  "$$PWD" "$$PWD" "$$PWD" "$$v" "$$PWD" > "$$tmp/go.work" && \
	echo "== go test -short on $$($(GO) env GOVERSION): ., grpclimit, otelrate" && \
	$(GO) test -short -count=1 ./... ./grpclimit/... ./otelrate/...

# gofmt, go vet and staticcheck in every module (in the workspace), then each
# module's go.mod and go.sum tidy and enough on their own, as published.
check:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$bad" ]; then echo "gofmt would change: $$bad"; exit 1; fi
	@for m in $(MODULES); do \
	  if [ -f $$m/go.mod ]; then \
	    echo "== vet, staticcheck $$m"; \
	    (cd $$m && $(GO) vet ./... && $(STATICCHECK) ./...) || exit 1; \
	  fi; \
	done
	@GO="$(GO)" ./.ci/tidy -check $(MODULES)

# go mod tidy in every module, outside the workspace (go mod tidy ignores go.work).
tidy:
	@GO="$(GO)" ./.ci/tidy $(MODULES)

# The release of docs/releasing.md rehearsed in a scratch clone, served
# from a file-based module proxy to a consumer outside the repository.
release-dryrun:
	@GO="$(GO)" ./.ci/release-dryrun

# The bench, a module of its own, imports no other module's internal
# packages: it gets its copy of internal/redisserver, which a test keeps equal.
generate:
	cd scripts && $(GO) generate .
	{ printf '// Code generated by make generate from internal/redisserver/redisserver.go. DO NOT EDIT.\n\n'; \
	  cat internal/redisserver/redisserver.go; } > bench/internal/redisserver/redisserver.go
