# flexiq-scaled. `make test` runs everything; `make help` lists targets.
SHELL := /bin/bash
GO := $(shell scripts/ensure-go.sh)
GOFMT := $(dir $(GO))gofmt
# The package version; a build from the same tree with another VERSION gives
# the "N+1" of the upgrade test.
VERSION ?= $(shell cat VERSION)
LDFLAGS := -X github.com/flexiq/flexiq-scaled/internal/version.Version=$(VERSION)
export CGO_ENABLED := 0

.PHONY: help deps build test unit e2e vet sandbox-bench clean

help:
	@echo "make test           unit tests, then the end-to-end suite in a real systemd sandbox (root)"
	@echo "make unit           unit tests only (no root needed)"
	@echo "make build          build bin/ (flexiq-scaled, the sandbox tool, the test worker)"
	@echo "make sandbox-bench  median sandbox start+stop time"

deps:
	@scripts/deps.sh

build:
	@mkdir -p bin
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/flexiq-scaled ./cmd/flexiq-scaled
	$(GO) build -o bin/ ./test/sandbox/cmd/flexiq-sandbox
	$(GO) build -o bin/flexiq-testworker ./test/worker

vet:
	$(GO) vet ./...
	@fmt=$$($(GOFMT) -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$fmt" ]; then echo "gofmt needed: $$fmt"; exit 1; fi

unit: vet
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /e2e)

# The e2e packages skip themselves with the reason when not run as root.
test: deps vet build
	$(GO) test -count=1 -timeout 15m ./...

sandbox-bench: build
	bench/sandbox-start-stop.sh

clean:
	rm -rf bin
