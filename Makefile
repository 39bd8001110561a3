# pdsoak — quick start: `make run` and `make test`. Nothing needed but Go.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
TOOLS := $(CURDIR)/bin/tools
export CGO_CFLAGS := -Wno-deprecated-declarations
STATICCHECK_VERSION := v0.8.2
# Packages with goroutines get -race; pure packages run without it to keep the suite short.
RACE_PKGS := ./server/... ./harness/... ./chaos/...
PURE_PKGS := ./kernels/... ./scenarios/... ./reports/... ./cmd/...
TEST_TIMEOUT ?= 12m
# Benchmarks report ratios against a baseline measured in the same run (see README).
BENCHTIME ?= 300ms

.PHONY: all build run test test-race test-pure bench lint fmt soak clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# Runs the smoke scenario (30 agent sessions) against the embedded reference PD server.
run: build
	$(BIN)/harness run scenarios/smoke.yaml

test: build test-pure test-race

test-pure:
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(PURE_PKGS)

test-race:
	$(GO) test -count=1 -race -timeout $(TEST_TIMEOUT) $(RACE_PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -count 1 ./... | tee bench.log

lint: $(TOOLS)/staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

fmt:
	gofmt -w $$(git ls-files '*.go')

# Long runs stay out of `make test`: SOAK_DURATION=2h make soak
soak: build
	$(BIN)/harness run scenarios/nightly-soak.yaml --duration $${SOAK_DURATION:-10m}

clean:
	rm -rf $(BIN) out bench.log
