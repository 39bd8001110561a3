# syntax=docker/dockerfile:1
# pdsoak image: the harness and the reference PD server as static binaries on distroless,
# run as nonroot. Scenarios are embedded in the harness binary. Build: make image.
# Used by `harness k8s render` (shard and merge Jobs) and `harness k8s render-reference`
# (router, prefill and decode Deployments): binaries at /usr/local/bin, no shell.

# Stage 1: static binaries. CGO_ENABLED=0: go-nvml's nocgo fallback (harness/gpu) reports
# no GPU instead of linking libnvidia-ml, and the binaries need no libc.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# .git is not in the build context (.dockerignore): the revision is not stamped.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/ ./cmd/harness ./cmd/pdserver

# Stage 2: distroless static, nonroot (uid 65532, the manifests' runAsUser).
FROM gcr.io/distroless/static-debian12:nonroot AS final
COPY --from=build /out/harness /out/pdserver /usr/local/bin/
USER nonroot:nonroot
WORKDIR /tmp
EXPOSE 30000 8998
ENTRYPOINT ["/usr/local/bin/harness"]
CMD ["--help"]
