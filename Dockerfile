# A small image of shardproxy: built with Go, run from a distroless base as
# a non-root user (65532, distroless's "nonroot", given by number so that
# Kubernetes' runAsNonRoot can check it). Build from the repository root:
#
#   docker build -t shardproxy .
#   docker run --rm -p 22121:22121 \
#       -v "$PWD/conf.yml:/etc/shardproxy/shardproxy.yml:ro" shardproxy
#
# The configuration is mounted, never baked in. Its listen addresses must
# be 0.0.0.0 (or the container's address) to be reachable from outside.
# Reload: docker kill -s HUP <container>. Stop: docker stop, which sends
# SIGTERM; the proxy drains for up to --shutdown-timeout (30 s), so give
# docker stop a longer -t, or a shorter --shutdown-timeout. Kubernetes:
# packaging/helm/shardproxy, docs/kubernetes.md.

# GO_VERSION is go.mod's go line (packaging's test keeps them equal).
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static (no cgo): the runtime image has no C library.
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/shardproxy ./cmd/shardproxy \
    && /out/shardproxy -V

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/shardproxy /usr/local/bin/shardproxy
USER 65532:65532
# 22222: twemproxy's stats port; 22223: the HTTP admin (/metrics), served
# on every address here so that it can be published; set admin_token in
# the file, or publish it to trusted networks only. Pools listen where
# the file says.
EXPOSE 22222 22223
ENTRYPOINT ["/usr/local/bin/shardproxy"]
CMD ["-c", "/etc/shardproxy/shardproxy.yml", "--admin", "0.0.0.0:22223"]
