# syntax=docker/dockerfile:1
#
# toold's container image: `make image`, or
#   docker build --build-arg VERSION=v1.2.3 --build-arg REVISION=$(git rev-parse HEAD) -t toold:v1.2.3 .
#
# Three stages:
#   build   Go toolchain; a static, stripped binary with its build info stamped.
#   tools   OPTIONAL (--target tools): the same binary on Debian slim with git,
#           for command tools that run programs; larger, with a shell and a
#           package manager inside, so more for an attacker to use.
#   runtime the DEFAULT (last stage): distroless static, non-root. No shell,
#           no package manager, no libc: only the binary, CA certificates,
#           /etc/passwd and tzdata. Command tools find no programs here.
#
# Both run images use uid/gid 65532 (distroless "nonroot"), the same numbers
# as runAsUser/runAsGroup in deploy/base/deployment.yaml (deploy/deploy_test.go
# checks they agree). Tags are pinned to a Go minor and a Debian release; pin
# by digest too (image@sha256:...) for reproducible production builds.
#
# Running it: toold listens on 127.0.0.1 unless configured, which a container
# cannot publish. Give it a config with a non-loopback listen address and
# auth keys (deploy/base/toold.yaml), e.g.
#   docker run -p 8080:8080 -v $PWD/deploy/base/toold.yaml:/etc/toold/toold.yaml:ro \
#     -e TOOLD_AGENT_KEY_SHA256=<sha256> -e TOOLD_NATS_PASSWORD=<password> \
#     toold:dev -config /etc/toold/toold.yaml -nats-url nats://<nats-host>:4222
# That config keeps the shared state in a three-node NATS cluster with
# JetStream (deploy/nats; state.nats.replicas: 3) as user toold: -nats-url
# names one the container reaches. POD_NAME may stay unset (the replica is
# then named after the container's host name). deploy/documented_test.go
# checks the config with exactly the variables this example sets.

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Pure Go: no libc to match at run time, so the binary runs on distroless
# static or scratch. -buildvcs=false: .git is not in the build context
# (.dockerignore); the revision comes in through REVISION instead.
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# No separate `go mod download` layer: it would fetch every module of
# go.mod, the test-only ones (Kubernetes, Prometheus, kustomize) included;
# the cache mounts keep modules and builds across runs instead, and the
# build fetches only what cmd/toold imports.
COPY . .
ARG VERSION=dev
ARG REVISION=
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" \
      -o /out/toold ./cmd/toold \
 && /out/toold -version \
 && mkdir -p /out/workspace

# Optional image for command tools that need programs (git). Build it with
# `docker build --target tools ...`. Same user, same entrypoint. Under the
# Deployment's securityContext (non-root, no capabilities, RuntimeDefault
# seccomp) command containment "auto" can use neither namespaces (needs
# root) nor, usually, bwrap (needs user namespaces), so it falls back to
# "none": rlimits, a process group, a clean environment. The pod is then
# the sandbox: read-only root, dropped capabilities, and a NetworkPolicy
# whose egress is DNS and the NATS cluster's client port (4222) only. Add
# packages here only for the tools you enable: each one is more for an
# agent-driven command to use.
FROM debian:bookworm-slim AS tools
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/toold /usr/local/bin/toold
COPY --from=build --chown=65532:65532 /out/workspace /workspace
# No passwd entry for 65532 here: HOME points somewhere writable for git
# (/tmp is an emptyDir in the Deployment).
ENV HOME=/tmp
WORKDIR /workspace
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/toold"]

# The default image.
FROM gcr.io/distroless/static-debian12:nonroot AS runtime
COPY --from=build /out/toold /toold
# An empty workspace owned by the runtime user; the Deployment mounts a
# volume over it.
COPY --from=build --chown=65532:65532 /out/workspace /workspace
WORKDIR /workspace
USER 65532:65532
# 8080: the API (listen); 9090: /metrics and pprof (admin_listen).
EXPOSE 8080 9090
ENTRYPOINT ["/toold"]
