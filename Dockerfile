# syntax=docker/dockerfile:1
#
# Portico's container image, for those with Docker (BuildKit), Podman or Buildah:
#
#   docker build --build-arg REVISION=$(git rev-parse HEAD) \
#     -t ghcr.io/portico-dev/portico:$(cat internal/version/VERSION) .
#
# Without a container runtime, `go run ./hack/image` builds the same image (see
# docs/install.md, "Building the image"). The version is internal/version/VERSION,
# compiled into the binary; REVISION is the commit `portico version` reports (the
# build context holds no .git to take it from, see .dockerignore).

# The builder runs on the build machine's platform and cross-compiles for the target's
# (docker buildx build --platform linux/arm64 ...).
FROM --platform=$BUILDPLATFORM golang:1.27.3 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG REVISION=""
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH:-amd64} go build -trimpath -buildvcs=false \
      -ldflags="-s -w -X github.com/portico-dev/portico/internal/version.revision=${REVISION}" \
      -o /rootfs/portico ./cmd/portico \
 && mkdir -p /rootfs/usr/local/bin \
 && ln -s /portico /rootfs/usr/local/bin/portico

# distroless/static: no shell, no package manager, no libc; CA certificates, tzdata,
# /tmp, and /etc/passwd with the nonroot user (65532) that deploy/ runs as.
FROM gcr.io/distroless/static-debian12:nonroot
ARG REVISION=""
LABEL org.opencontainers.image.source="https://github.com/portico-dev/portico" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.title="portico"
# /portico is the entrypoint; /usr/local/bin/portico, a link to it, puts it on the
# PATH for deploy/'s `command: [portico]`.
COPY --from=build /rootfs/ /
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/portico"]
