# pdsoak — quick start: `make run` and `make test`. Nothing needed but Go.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
TOOLS := $(CURDIR)/bin/tools
export CGO_CFLAGS := -Wno-deprecated-declarations
STATICCHECK_VERSION := v0.8.2
# Pure packages (no goroutines) run without -race to keep the suite short; every other
# package gets -race, so a new package is raced unless it is listed here. $(wildcard) lets a
# listed directory be absent.
PURE_DIRS := kernels scenarios reports cmd version sse suggest assertion metricnames metricsel traceparent \
	dashboards nightly internal/nearest
PURE_PKGS := $(patsubst %,./%/...,$(wildcard $(PURE_DIRS)))
empty :=
space := $(empty) $(empty)
# Recursive (=) so `go list` runs only for the targets that use it.
RACE_PKGS = $(shell $(GO) list ./... | grep -Ev '^pdsoak/($(subst $(space),|,$(strip $(PURE_DIRS))))(/|$$)')
TEST_TIMEOUT ?= 12m
# make test-stress (for anyone who touches timing): the whole `make test` STRESS_RUNS times
# in a row under `stress-ng --cpu STRESS_CPU`, stopping at the first failure. Not part of
# `make test`.
STRESS_RUNS ?= 5
STRESS_CPU ?= 2
# Benchmarks report ratios against a baseline measured in the same run (see README).
BENCHTIME ?= 300ms

.PHONY: all build run test test-race test-pure test-stress test-browser skip-browser third-party-deps bench bench-docs bench-all lint lint-workflows fmt soak clean image

all: build

# -buildvcs=auto: stamp the VCS revision for --version and provenance even where GOFLAGS
# says -buildvcs=false (as on some CI images).
build:
	$(GO) build -buildvcs=auto -o $(BIN)/ ./cmd/...

# Runs the smoke scenario (30 agent sessions) against the embedded reference PD server.
run: build
	$(BIN)/harness run scenarios/smoke.yaml

# test-browser runs only where chromium is installed, so `make test` needs nothing but Go
# (.ci/run installs chromium first).
test: build lint-workflows third-party-deps test-pure test-race $(if $(shell command -v chromium 2>/dev/null),test-browser,skip-browser)

# The third-party OpenAI-compatible server the e2e tests judge the harness against
# (CopilotKit's aimock, pinned by its package-lock.json), installed with npm where npm is
# present (again when the lock changes); without it those tests skip and say so.
AIMOCK_DIR := harness/e2e/testdata/aimock
third-party-deps:
	@if cmp -s $(AIMOCK_DIR)/package-lock.json $(AIMOCK_DIR)/node_modules/.pdsoak-lock 2>/dev/null; then :; \
	elif ! command -v npm >/dev/null; then \
		echo "make: no npm here: the third-party server tests (harness/e2e TestThirdParty*) skip"; \
	elif npm ci --prefix $(AIMOCK_DIR) --no-audit --no-fund --loglevel=error >/dev/null; then \
		cp $(AIMOCK_DIR)/package-lock.json $(AIMOCK_DIR)/node_modules/.pdsoak-lock; \
	else echo "make: npm could not install aimock: the third-party server tests skip"; fi

test-pure:
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(PURE_PKGS)

test-race:
	$(GO) test -count=1 -race -timeout $(TEST_TIMEOUT) $(RACE_PKGS)

# Renders report.html from a short real run in headless chromium with the network
# disabled; fails on a JavaScript error or an empty chart. Installs Debian's chromium if
# absent. SCREENSHOT=docs/report.png refreshes the README's screenshot.
skip-browser:
	@echo "make: no chromium here: the browser check of report.html, compare.html and the trend page is skipped (.ci/run installs chromium)"

test-browser: build
	.ci/browser-check

# stress-ng runs in the background and is always stopped (trap), whatever ends the loop; its
# --timeout is only a backstop should this shell be SIGKILLed.
test-stress:
	@command -v stress-ng >/dev/null || { apt-get update && apt-get install -y stress-ng; }
	@set -u; \
	stress-ng --cpu $(STRESS_CPU) --timeout 6h --quiet & spid=$$!; \
	trap 'kill $$spid 2>/dev/null; wait $$spid 2>/dev/null' EXIT; \
	trap 'exit 130' INT TERM; \
	for i in $$(seq 1 $(STRESS_RUNS)); do \
		echo "test-stress: run $$i of $(STRESS_RUNS) (stress-ng --cpu $(STRESS_CPU))"; \
		if ! $(MAKE) --no-print-directory test; then \
			echo "test-stress: run $$i of $(STRESS_RUNS) FAILED"; exit 1; \
		fi; \
	done; \
	echo "test-stress: $(STRESS_RUNS) of $(STRESS_RUNS) runs passed"

# make bench: every performance figure of docs/BENCHMARKS.md against its goal, in one
# table, printed and written to bench.md (go test's output: bench.log). A figure that
# misses is reported, not a build failure. The figures, goals and -benchtimes are declared
# in internal/benchtable/figures.go. bench-docs also refreshes docs/BENCHMARKS.md;
# bench-all runs every benchmark of the module.
# BENCH_COUNT: runs of each benchmark (each in its own process); the table shows the
# median and the spread, and the time budget scales with the count.
BENCH_COUNT ?= 3
bench:
	$(GO) run ./cmd/benchtable -count $(BENCH_COUNT) -o bench.md -log bench.log -command 'make bench'

bench-docs:
	$(GO) run ./cmd/benchtable -count $(BENCH_COUNT) -o bench.md -log bench.log -docs docs/BENCHMARKS.md -command 'make bench-docs'

bench-all:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -count 1 ./... | tee bench.log

lint: lint-workflows $(TOOLS)/staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...

# The GitHub workflows, checked by actionlint (pinned by go.mod's tool directive). Without
# shellcheck on PATH, actionlint skips the checks of run: scripts.
lint-workflows:
	$(GO) tool actionlint

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

fmt:
	gofmt -w $$(git ls-files '*.go')

# Long runs stay out of `make test`: SOAK_DURATION=2h make soak
soak: build
	$(BIN)/harness run scenarios/nightly-soak.yaml --duration $${SOAK_DURATION:-10m}

clean:
	rm -rf $(BIN) out bench.log bench.md $(AIMOCK_DIR)/node_modules

# The container image for Kubernetes (Dockerfile; see README's Kubernetes section). Not
# part of `make test`: it needs a docker engine and pulls the base images.
IMAGE ?= pdsoak:dev
DOCKER ?= docker
image:
	@command -v $(DOCKER) >/dev/null 2>&1 || { echo "make image: $(DOCKER) is not installed (or not on PATH); install a docker engine, or set DOCKER=podman, to build $(IMAGE)" >&2; exit 1; }
	@$(DOCKER) info >/dev/null 2>&1 || { echo "make image: the $(DOCKER) engine is not reachable ($(DOCKER) info failed); start it to build $(IMAGE)" >&2; exit 1; }
	$(DOCKER) build -t $(IMAGE) .

# compare's gate, calibrated (docs/COMPARE.md): GATE_PAIRS same-server pairs and as many
# 10% and 25% slower pairs of the gate-calibration scenario, simulated (virtual clock,
# deterministic per seed; about 10 minutes on 2 busy cores); prints the false-alarm and
# detection rates per metric and exits 1 when the goals are not met. GATE_FLAGS='-real
# bin/pdserver' runs them on the real reference server instead (a quiet machine; hours).
GATE_PAIRS ?= 40
GATE_FLAGS ?=
.PHONY: gate-calibration
gate-calibration:
	$(GO) run ./cmd/gatecal -pairs $(GATE_PAIRS) $(GATE_FLAGS)
