# The whole test suite: the library and the scripts (fast, on miniredis and a
# redis-server the tests start), then every module that tests against real
# servers, integrates, or measures. `make test` is what CI runs.
GO ?= go
STATICCHECK ?= staticcheck
# Every Go module of the repository; nested modules keep their dependencies
# (OpenTelemetry, gRPC, testcontainers, the peer) out of the library's go.sum.
MODULES := . otelrate grpclimit integration_test bench

.PHONY: test check generate
test:
	@for m in $(MODULES); do \
	  if [ -f $$m/go.mod ]; then \
	    echo "== go test $$m"; \
	    (cd $$m && $(GO) test -race -shuffle=on -count=1 ./...) || exit 1; \
	  fi; \
	done
	@echo "== go test integration_test on Valkey (the same tests, valkey-server as every fresh server)"
	@if command -v valkey-server >/dev/null || [ "$$CI" = true ]; then \
	  (cd integration_test && REDISRATE_SERVER=valkey-server $(GO) test -race -shuffle=on -count=1 ./...) || exit 1; \
	else echo "SKIPPED: valkey-server is not installed (bash .ci/run installs it)"; fi
	@echo "== go test . (allocation counts, which -race changes)"
	@$(GO) test -count=1 -run 'Alloc' .

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
