# The whole test suite: the library (fast, on miniredis), then every module
# that tests against real servers or measures. `make test` is what CI runs.
GO ?= go
MODULES := . integration_test bench

.PHONY: test generate vet
test:
	@for m in $(MODULES); do \
	  if [ -f $$m/go.mod ]; then \
	    echo "== go test $$m"; \
	    (cd $$m && $(GO) test -race -count=1 ./...) || exit 1; \
	  fi; \
	done

generate:
	$(GO) generate ./...

vet:
	@for m in $(MODULES); do [ -f $$m/go.mod ] && (cd $$m && $(GO) vet ./...) || true; done
