# The whole test suite: the library and the scripts (fast, on miniredis and a
# redis-server the tests start), then every module that tests against real
# servers, integrates, or measures. `make test` is what CI runs.
GO ?= go
STATICCHECK ?= staticcheck
# Every Go module of the repository; nested modules keep their dependencies
# (OpenTelemetry, gRPC, testcontainers, the peer) out of the library's go.sum.
MODULES := . otelrate grpclimit integration_test bench

.PHONY: test check generate
# The Node snippet's client (ioredis) is installed when npm is there. Every
# test a missing tool skipped is listed, loudly, at the end
# (internal/testsummary reads go test -json).
test:
	@if command -v npm >/dev/null 2>&1 && [ ! -d examples/node/node_modules/ioredis ]; then \
	  echo "== npm ci --prefix examples/node (ioredis, for the Node snippet's test)"; \
	  npm ci --prefix examples/node --no-audit --no-fund --loglevel=error || \
	    echo "npm ci failed: the Node snippet's test will be skipped"; \
	fi
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(GO) build -o "$$tmp/testsummary" ./internal/testsummary && \
	for m in $(MODULES); do \
	  if [ -f $$m/go.mod ]; then \
	    echo "== go test $$m"; \
	    (cd $$m && $(GO) test -json -race -shuffle=on -count=1 ./...) | "$$tmp/testsummary" -skips "$$tmp/skips" || exit 1; \
	  fi; \
	done && \
	echo "== go test . (allocation counts, which -race changes)" && \
	$(GO) test -count=1 -run 'Alloc' . && \
	"$$tmp/testsummary" -report -skips "$$tmp/skips"

# gofmt, go vet and staticcheck in every module, and generated files up to date.
check:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$bad" ]; then echo "gofmt would change: $$bad"; exit 1; fi
	@for m in $(MODULES); do \
	  if [ -f $$m/go.mod ]; then \
	    echo "== vet, staticcheck $$m"; \
	    (cd $$m && $(GO) vet ./... && $(STATICCHECK) ./...) || exit 1; \
	  fi; \
	done

generate:
	cd scripts && $(GO) generate .
