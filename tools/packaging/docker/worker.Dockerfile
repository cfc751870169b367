# htam-worker image for GPU hosts: NVIDIA's CUDA devel image (the worker compiles candidates with
# nvcc at run time, so the toolkit stays in the runtime stage), multi-stage. Stage 1 builds htam
# with the CUDA backend and its Debian-format packages on the same base; stage 2 installs the
# htam-worker and htam-tools packages (dependencies from the base's archive).
# Build from the repository root:
#   docker build -f tools/packaging/docker/worker.Dockerfile -t htam/htam-worker:0.1.0 .
# Run with the NVIDIA container toolkit (--gpus all, or nvidia.com/gpu in Kubernetes).

ARG CUDA_IMAGE=nvidia/cuda:12.6.3-devel-ubuntu24.04
FROM ${CUDA_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config file dpkg-dev \
      libzmq3-dev cppzmq-dev libsodium-dev libflatbuffers-dev flatbuffers-compiler \
      liblmdb-dev libfaiss-dev libopenblas-dev liblapack-dev libomp-dev \
      libboost-program-options-dev nlohmann-json3-dev python3 \
    && rm -rf /var/lib/apt/lists/*
COPY . /src
RUN cmake -S /src -B /build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHTAM_TESTS=OFF \
      -DHTAM_WITH_CUDA=ON -DHTAM_WITH_HIP=OFF \
    && cmake --build /build -j"$(nproc)" \
    && cd /build && cpack -G DEB -B /debs

FROM ${CUDA_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
COPY --from=build /debs/*.deb /tmp/debs/
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
         /tmp/debs/htam-worker_*.deb /tmp/debs/htam-tools_*.deb /tmp/debs/python3-htam_*.deb \
    && rm -rf /var/lib/apt/lists/* /tmp/debs
# Compile cache and scratch; an emptyDir or host path.
VOLUME /var/lib/htam-worker
WORKDIR /var/lib/htam-worker
# Root inside the container so that candidate runners drop to eval.sandbox_user (nobody) in
# their own namespaces (docs/backends.md, "Containment"); the worker never runs candidates itself.
ENTRYPOINT ["/usr/bin/htam-worker", "--config", "/etc/htam/worker.conf", "--general.data_dir", "/var/lib/htam-worker"]
CMD ["--worker.connect", "tcp://htamd:7879"]
