# berth's image for people who build with Docker (BuildKit):
#
#   docker buildx build --platform linux/amd64,linux/arm64 --build-arg VERSION=v0.1.0 -t berth:v0.1.0 .
#
# `make image` builds the same image without Docker (hack/image: the same
# static binary, entrypoint, user and labels on a base built from Go
# modules). hack/image's tests check that this file keeps the same
# entrypoint and user.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static (no cgo: the base has no libc), with the time zone database linked
# in for Headroom schedules.
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -tags timetzdata \
    -ldflags "-s -w -X github.com/berth-dev/berth/internal/version.Version=${VERSION}" -o /out/berth ./cmd/berth

FROM gcr.io/distroless/static:nonroot
ARG VERSION=dev
ARG REVISION=
LABEL org.opencontainers.image.title="berth" \
      org.opencontainers.image.description="berth: headroom-aware node autoscaler for Kubernetes (controller, local control plane, offline planner)" \
      org.opencontainers.image.source="https://github.com/berth-dev/berth" \
      org.opencontainers.image.url="https://github.com/berth-dev/berth" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/berth /berth
USER 65532:65532
ENTRYPOINT ["/berth"]
