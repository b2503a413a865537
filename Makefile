# flexiq-scaled. `make test` runs everything; `make help` lists targets.
SHELL := /bin/bash
GO := $(shell scripts/ensure-go.sh)
GOFMT := $(dir $(GO))gofmt
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.0.0)
export CGO_ENABLED := 0

.PHONY: help deps build test unit e2e vet sandbox-bench clean

help:
	@echo "make test           unit tests, then the end-to-end suite in a real systemd sandbox (root)"
	@echo "make unit           unit tests only (no root needed)"
	@echo "make build          build bin/"
	@echo "make sandbox-bench  median sandbox start+stop time"

deps:
	@scripts/deps.sh

build:
	@mkdir -p bin
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
