# agentbot container image: a static binary built in one stage, shipped on a minimal non-root base.
#
#   docker build -t agentbot .            (or: podman build --format docker -t agentbot .)
#   docker run --rm agentbot demo         the scripted demo, no token
#   docker compose -f deploy/compose.yaml up -d
#
# Nothing is downloaded at run time; the build downloads only Go modules (go mod download). Every RUN is in
# exec form, so the build stage needs no shell. The base images are arguments (a mirror, or local images).
ARG BUILD_IMAGE=docker.io/library/golang:1.26-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN ["go", "mod", "download"]
COPY . .
ARG VERSION=dev
ENV CGO_ENABLED=0 GOFLAGS="-trimpath -ldflags=-X=main.version=${VERSION}"
# The (empty) volume directory, made without a shell: a RUN creates its WORKDIR.
WORKDIR /out/data
RUN ["go", "build", "-C", "/src", "-o", "/out/bot", "./cmd/bot"]

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/bot /usr/local/bin/bot
COPY --from=build --chown=65532:65532 /out/data /data
COPY deploy/config.yaml /etc/agentbot/config.yaml
# distroless "nonroot": uid/gid 65532. The bbolt file lives on the /data volume.
USER 65532:65532
WORKDIR /data
VOLUME ["/data"]
EXPOSE 9464
# /healthz on http.listen (the bot asks itself: the base has no curl). Docker-format images only: with
# podman build, pass --format docker to keep it.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/bot", "healthcheck", "-config", "/etc/agentbot/config.yaml"]
ENTRYPOINT ["/usr/local/bin/bot"]
CMD ["run", "-config", "/etc/agentbot/config.yaml"]
