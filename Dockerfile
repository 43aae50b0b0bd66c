# ScheduleMaster image: one static binary, no shell, a non-root user.
#
# Where registries are reachable (the binary is built in the golang stage):
#   docker build -t schedulemaster .                         # master/worker, FROM scratch
#   docker build --target worker-shell -t schedulemaster:worker-shell .
#
# Air-gapped (no base image can be pulled): build the binary and gather the
# files on the host, then take them instead of the golang stage:
#   deploy/image/prebuilt.sh                                 # fills dist/image/rootfs
#   podman build --build-arg BINARY=prebuilt -t schedulemaster .
# (worker-shell also needs a local image with a shell: --build-arg SHELL_IMAGE=...)
#
# Stages: build (golang) and prebuilt (host files) each produce /rootfs;
# BINARY picks one of them as "files"; the runtime stages copy from "files"
# only, so the stage not picked is never built (BuildKit and buildah skip it).

ARG GO_IMAGE=golang:1.26
ARG SHELL_IMAGE=debian:bookworm-slim
# build: compile in GO_IMAGE; prebuilt: take dist/image/rootfs from the context.
ARG BINARY=build

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG DATE=unknown
ARG PKG=github.com/schedulemaster-go/schedulemaster/buildinfo
# The variables `schedulemaster version`, /health and sm_build_info read (the
# linker ignores an -X name the binary does not define).
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X ${PKG}.version=${VERSION} -X ${PKG}.commit=${COMMIT} -X ${PKG}.date=${DATE}" \
      -o /rootfs/usr/local/bin/schedulemaster ./cmd/schedulemaster \
 && mkdir -p /rootfs/etc/ssl/certs /rootfs/var/lib/schedulemaster /rootfs/tmp && chmod 1777 /rootfs/tmp \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ \
 && cp deploy/image/etc/passwd deploy/image/etc/group /rootfs/etc/

FROM scratch AS prebuilt
COPY dist/image/rootfs/ /rootfs/

FROM ${BINARY} AS files

# Workers that run shell tasks need /bin/sh and the tools the tasks call: the
# same binary on a distribution base (SHELL_IMAGE). Start it with
# --allow-shell (SM_ALLOW_SHELL=true) and --labels for its pool.
FROM ${SHELL_IMAGE} AS worker-shell
COPY --from=files /rootfs/usr/local/bin/schedulemaster /usr/local/bin/schedulemaster
# HTTPS tasks verify with the same bundle as the runtime image (slim bases ship none).
COPY --from=files /rootfs/etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
# Plain shell, not useradd/adduser: works on debian, alpine and busybox bases.
RUN echo 'schedulemaster:x:65532:65532:ScheduleMaster:/var/lib/schedulemaster:/bin/sh' >> /etc/passwd \
 && echo 'schedulemaster:x:65532:' >> /etc/group \
 && mkdir -p /var/lib/schedulemaster \
 && chown 65532:65532 /var/lib/schedulemaster
ENV SM_DATA_DIR=/var/lib/schedulemaster \
    HOME=/var/lib/schedulemaster
WORKDIR /var/lib/schedulemaster
USER 65532:65532
VOLUME ["/var/lib/schedulemaster"]
EXPOSE 30001
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/schedulemaster", "healthcheck", "--url", "http://127.0.0.1:30001/health"]
ENTRYPOINT ["schedulemaster"]
CMD ["worker"]

# The default target (the last stage): masters, and workers that run HTTP
# tasks only.
FROM scratch AS runtime
COPY --from=files /rootfs/usr/local/bin/schedulemaster /usr/local/bin/schedulemaster
COPY --from=files /rootfs/etc/ /etc/
# Owned by the user, so that a new named volume (which takes the image's
# directory) is writable; /tmp for the few libraries that want one.
COPY --from=files --chown=65532:65532 /rootfs/var/lib/schedulemaster/ /var/lib/schedulemaster/
COPY --from=files --chown=65532:65532 /rootfs/tmp/ /tmp/
ENV SM_DATA_DIR=/var/lib/schedulemaster \
    PATH=/usr/local/bin
WORKDIR /var/lib/schedulemaster
USER 65532:65532
VOLUME ["/var/lib/schedulemaster"]
EXPOSE 30000
# A master's /ready (database up, migrations applied, not fenced). A worker
# container overrides it: healthcheck --url http://127.0.0.1:30001/health.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/schedulemaster", "healthcheck"]
ENTRYPOINT ["schedulemaster"]
CMD ["master"]
