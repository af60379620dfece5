# toold — common tasks. The README's two commands need none of this:
#   go run ./cmd/toold       start the service
#   go test -race ./...      run the tests

VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)
IMAGE    ?= toold:$(VERSION)

.DEFAULT_GOAL := build

.PHONY: help build run deps test test-race test-all skips lint fuzz bench search-eval load image release release-tools helm chart ci

help: ## this list
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z-]*:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## static binary in bin/, build info stamped
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/toold ./cmd/toold

run: ## the service on 127.0.0.1:8080 with the built-in config
	go run ./cmd/toold

deps: ## what the tests use besides Go: the MCP peers, the contract's linters, axe-core, the Anthropic and OpenAI SDKs, undici (npm ci, pinned); chromium comes from apt
	go mod download
	npm ci --prefix test/mcp --ignore-scripts --no-audit --no-fund
	npm ci --prefix test/openapi --ignore-scripts --no-audit --no-fund
	npm ci --prefix test/console --ignore-scripts --no-audit --no-fund
	npm ci --prefix test/search --ignore-scripts --no-audit --no-fund
	npm ci --prefix test/egress --ignore-scripts --no-audit --no-fund

test: ## the tests (those needing make deps skip, saying so with -v)
	go test ./...

test-race: ## the tests with the race detector
	go test -race ./...

test-all: deps ## every test, none skipped for a missing npm package (as CI runs them)
	TOOLD_REQUIRE_NPM=1 go test -race ./...

skips: ## the tests with -race, their progress as they run, and the skips by reason; rewrites README.md's skip count and the run it is counted from
	bash -o pipefail -c 'go test -race -json ./... | go run ./internal/testreport \
	  -save internal/testreport/testdata/readme-run.json.gz -readme README.md'

lint: ## format and vet, as CI checks them
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	go vet ./...

fuzz: ## every fuzz target, FUZZTIME seconds each (default 10); CI fuzzes the changed packages' and a rotation (.ci/fuzz)
	FUZZ_ALL=1 FUZZ_ROTATION_TIME=$${FUZZTIME:-10} .ci/fuzz

bench: ## in-process benchmarks (pipeline, file tools, sanitizer, command tools)
	go test -run '^$$' -bench . -benchmem ./...

search-eval: ## tool search's quality on bench/search's evaluation set beside plain BM25, and each technique's share (docs/search.md)
	go run ./bench/search -ablation

load: ## the loopback load harness (bench/load; -only peers,gc for the hot-path comparison): throughput vs a bare net/http server, overload, memory, the state store and executions, MCP, an upstream MCP server hosted
	go run ./bench/load

image: ## the container image (needs a Docker engine)
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) .

# GoReleaser and cyclonedx-gomod, pinned as tools of their own module
# (tools/release/go.mod), installed into bin/release: a build of the pinned
# version already at hand (bin/release, PATH, $(go env GOPATH)/bin, .ci/run's
# cache) is reused; only without one are they built (GoReleaser: about 16
# minutes on 2 cores, once).
RELEASE_BIN   := $(CURDIR)/bin/release
RELEASE_FLAGS ?= --snapshot

release-tools: ## GoReleaser and cyclonedx-gomod at the versions tools/release/go.mod pins, in bin/release (reused when a build of them is at hand)
	tools/release/install.sh $(RELEASE_BIN)

release: release-tools ## archives for every target, an SBOM per binary, checksums.txt and the Homebrew formula in dist/ (a snapshot; RELEASE_FLAGS= on a tag)
	PATH="$(RELEASE_BIN):$$PATH" TOOLD_REVISION=$(REVISION) goreleaser release --clean $(RELEASE_FLAGS)

# Helm, pinned in test/helm/go.mod (a module of its own), built into bin/helm.
HELM := $(CURDIR)/bin/helm
CHART := deploy/helm/toold

helm: ## Helm at the version test/helm/go.mod pins, in bin/helm
	go -C test/helm build -trimpath -o $(HELM) helm.sh/helm/v4/cmd/helm

chart: helm ## lint the Helm chart strictly and render it with its defaults and each ci/ values file, as CI does
	@for values in "" $(CHART)/ci/*.yaml; do \
	  echo "-- $${values:-defaults}"; \
	  $(HELM) lint --strict $(CHART) $${values:+-f "$$values"} && \
	  $(HELM) template toold $(CHART) $${values:+-f "$$values"} >/dev/null || exit 1; \
	done

ci: ## what CI runs
	.ci/run
