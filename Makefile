# flexiq-scaled. `make test` runs everything; `make help` lists targets.
SHELL := /bin/bash
GO := $(shell scripts/ensure-go.sh)
GOFMT := $(dir $(GO))gofmt
# The package version; a build from the same tree with another VERSION gives
# the "N+1" of the upgrade test.
VERSION ?= $(shell cat VERSION)
LDFLAGS := -X github.com/flexiq/flexiq-scaled/internal/version.Version=$(VERSION)
export CGO_ENABLED := 0

.PHONY: help deps build test unit e2e faults vet sandbox-bench bench clean demo deb lint-deb
.PHONY: fuzz fuzz-short docs

help:
	@echo "make demo           the .deb in a throwaway systemd, replaying a real job trace (root)"
	@echo "make test           unit tests, then the end-to-end suite in a real systemd sandbox (root)"
	@echo "make unit           unit tests only (no root needed)"
	@echo "make faults         the fault-injection suite alone (root); its figures on FIGURE lines"
	@echo "make fuzz           fuzz the config loader and check-config, $(FUZZTIME) each (FUZZTIME= to change)"
	@echo "make docs           regenerate docs/configuration.md and flexiq-scaled.toml(5) from internal/config"
	@echo "make build          build bin/ (flexiq-scaled, its plotting helper, the sandbox tool, the test worker)"
	@echo "make sandbox-bench  median sandbox start+stop time"
	@echo "make bench          issue 11's P1 (reaction), P2 (scale-out) and P3 (tick cost), with their targets (root, ~15 min)"
	@echo "make deb            dist/flexiq-scaled_$(VERSION)_<arch>.deb (VERSION=, DIST= to change)"
	@echo "make lint-deb       make deb, then lintian: no error and no warning allowed"

# The configuration reference is generated from the KeyDocs that
# internal/config declares beside its checks, and the man page also carries
# docs/sources/*.md; a unit test (TestCommittedDocsMatch) fails when the
# committed files are stale.
docs:
	$(GO) run ./internal/refdoc/gen

deps:
	@scripts/deps.sh

build:
	@mkdir -p bin
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/flexiq-scaled ./cmd/flexiq-scaled
	$(GO) build -o bin/flexiq-scaled-plot ./cmd/flexiq-scaled-plot
	$(GO) build -o bin/ ./test/sandbox/cmd/flexiq-sandbox
	$(GO) build -o bin/flexiq-testworker ./test/worker

# test/clients/river is a module of its own, which ./... does not reach.
vet:
	$(GO) vet ./...
	$(GO) -C test/clients/river vet ./...
	@fmt=$$($(GOFMT) -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$fmt" ]; then echo "gofmt needed: $$fmt"; exit 1; fi

# The packages whose tests boot a sandbox (a real systemd): they skip
# themselves, saying why, when not run as root.
SANDBOX_PKGS := '/test/(e2e|debtest|sandbox|faults|servers|services|fleet)$$|/internal/units$$'

unit: vet
	$(GO) test -count=1 $$($(GO) list ./... | grep -Ev $(SANDBOX_PKGS))

# The unit tests first, two packages at a time; then the sandbox packages
# with -p 1: each of them boots its own systemd, and run side by side on two
# cores they would only make each other's timings noisy.
test: deps vet build
	$(GO) test -count=1 -timeout 15m $$($(GO) list ./... | grep -Ev $(SANDBOX_PKGS))
	$(GO) test -count=1 -p 1 -timeout 15m $$($(GO) list ./... | grep -E $(SANDBOX_PKGS))
	@$(MAKE) --no-print-directory fuzz-short

# Native Go fuzzing (testing.F) of the config loader and of the check-config
# command: never a panic, every problem one printable "FILE: KEY: MSG" line,
# and an accepted file's effective config loads again. `make test` runs the
# loader's target (FuzzParse) for FUZZTIME_SHORT, `make fuzz` both for
# FUZZTIME; every `go test` replays both targets' corpora (the seeds and
# testdata/fuzz/). An input that fails is written to the package's
# testdata/fuzz/, which plain `go test` then replays: commit it with the fix.
# The first run compiles an instrumented test binary: about 30 s for the
# loader, 3 minutes for check-config, which links the whole daemon with
# SQLite (measured with an empty build cache, as CI has): that is why the
# short run, which CI pays on every stop, leaves check-config's mutations to
# `make fuzz` (FuzzParse mutates the same loader).
# The short run is a count of executions, not a duration: with a duration,
# Go 1.26's fuzzing coordinator can fail a target that found nothing with a
# bare "context deadline exceeded" when a starved worker is still busy as
# the time runs out (go.dev/issue/75804, fixed in Go 1.27), and CI's two
# cores are often starved. 5000 runs take a few seconds there.
FUZZTIME_SHORT ?= 5000x
FUZZTIME ?= 2m
FUZZ_TARGETS := ./internal/config:FuzzParse ./cmd/flexiq-scaled:FuzzCheckConfig
FUZZ_TARGETS_SHORT := ./internal/config:FuzzParse

fuzz-short:
	@for t in $(FUZZ_TARGETS_SHORT); do \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME_SHORT) "$${t%%:*}" || exit 1; \
	done

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}" || exit 1; \
	done

# The fault-injection suite alone (test/faults; `make test` runs it too).
# Each test boots a sandbox of its own and they run side by side. Every
# fault's measurements are on "FIGURE fault=..." lines, repeated at the end;
# docs/reliability.md's table comes from them. The full log is bin/faults.log.
faults: deps
	@mkdir -p bin
	@set -o pipefail; $(GO) test -count=1 -v -timeout 20m ./test/faults/ 2>&1 | tee bin/faults.log; rc=$$?; \
		echo "--- figures:"; grep -o 'FIGURE .*' bin/faults.log; exit $$rc

sandbox-bench: build
	bench/sandbox-start-stop.sh

# Benchmarks, never timed assertions: the figures and their targets are
# printed, see bench/perf.sh for the settings.
bench: deps build
	bench/perf.sh

# The README's first command (test/demo/README.md): the .deb that `make deb`
# just built, installed in a throwaway systemd, scaling workers for a replayed
# job trace. It needs root, Linux and overlayfs, says so and fails otherwise,
# and fails if the daemon never scales or no job completes. It builds the test
# worker itself. The package is this machine's architecture: it is installed
# here, in the sandbox.
demo: deps deb
	@mkdir -p bin
	$(GO) build -o bin/flexiq-demo ./test/demo
	GO='$(GO)' bin/flexiq-demo --deb '$(DIST)'/flexiq-scaled_'$(VERSION)'_$$(dpkg --print-architecture).deb

# The Debian package, from packaging/deb with dpkg-deb (see build.sh there):
# the binary with this LDFLAGS's version, the units, the conffile, the man
# pages. `make deb VERSION=0.1.1 DIST=/tmp/x` builds another version elsewhere.
DIST ?= dist
deb:
	@GO='$(GO)' LDFLAGS='$(LDFLAGS)' packaging/deb/build.sh --version '$(VERSION)' --out '$(DIST)'

# Overrides, each with its reason, are in packaging/deb/lintian-overrides.
lint-deb:
	@deb=$$(GO='$(GO)' LDFLAGS='$(LDFLAGS)' packaging/deb/build.sh --version '$(VERSION)' --out '$(DIST)') && \
		echo "lintian $$deb" && lintian --fail-on error,warning "$$deb"

clean:
	rm -rf bin
