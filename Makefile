# toold — common tasks. The README's two commands need none of this:
#   go run ./cmd/toold       start the service
#   go test -race ./...      run the tests

VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)
IMAGE    ?= toold:$(VERSION)

.PHONY: build run test test-race lint fuzz bench load image ci

build: ## static binary in bin/, build info stamped
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/toold ./cmd/toold

run: ## the service on 127.0.0.1:8080 with the built-in config
	go run ./cmd/toold

test:
	go test ./...

test-race:
	go test -race ./...

lint: ## format and vet, as CI checks them
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	go vet ./...

fuzz: ## every fuzz target, FUZZTIME each (default 10s)
	FUZZTIME=$${FUZZTIME:-10s} bash -c 'git grep -l "^func Fuzz" -- "*_test.go" | while read -r f; do for t in $$(grep -o "^func Fuzz[A-Za-z0-9_]*" $$f | sed "s/^func //"); do go test -run="^$$" -fuzz="^$$t\$$" -fuzztime=$$FUZZTIME ./$$(dirname $$f) || exit 1; done; done'

bench: ## in-process benchmarks (pipeline, file tools, sanitizer, command tools)
	go test -run '^$$' -bench . -benchmem ./...

load: ## the loopback load harness (bench/load): throughput vs a bare net/http server, overload, memory, the state store and executions, MCP, an upstream MCP server hosted
	go run ./bench/load

image: ## the container image (needs a Docker engine)
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) .

ci: ## what CI runs
	.ci/run
