# htamd image: Debian bookworm, multi-stage. Stage 1 builds htam and its Debian packages (the
# same `cpack -G DEB` as tests/packaging/deb_test.sh); stage 2 installs the packages on
# bookworm-slim, so the image holds exactly what `apt install ./htamd_*.deb` gives an operator.
# Build from the repository root (BuildKit reads htamd.Dockerfile.dockerignore beside this file):
#   docker build -f tools/packaging/docker/htamd.Dockerfile -t htam/htamd:0.1.0 .
# CPU evaluation is included (htam-worker package: the sandboxed worker and the CPU plugin);
# GPU evaluation comes from htam-worker containers (worker.Dockerfile) connecting to port 7879.

FROM debian:bookworm AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config file \
      libzmq3-dev cppzmq-dev libsodium-dev libflatbuffers-dev flatbuffers-compiler \
      liblmdb-dev libfaiss-dev libopenblas-dev liblapack-dev libomp-dev \
      libboost-program-options-dev nlohmann-json3-dev python3 \
    && rm -rf /var/lib/apt/lists/*
COPY . /src
RUN cmake -S /src -B /build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHTAM_TESTS=OFF \
      -DHTAM_WITH_CUDA=OFF -DHTAM_WITH_HIP=OFF \
    && cmake --build /build -j"$(nproc)" \
    && cd /build && cpack -G DEB -B /debs

FROM debian:bookworm-slim
ARG DEBIAN_FRONTEND=noninteractive
COPY --from=build /debs/*.deb /tmp/debs/
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
         /tmp/debs/htamd_*.deb /tmp/debs/htam-worker_*.deb /tmp/debs/htam-tools_*.deb \
         /tmp/debs/python3-htam_*.deb \
    && rm -rf /var/lib/apt/lists/* /tmp/debs
# The store: mount a volume here (a PersistentVolumeClaim in Kubernetes).
VOLUME /var/lib/htam
WORKDIR /var/lib/htam
USER htam
# 7878 clients, 7879 remote workers, 9464 Prometheus metrics and /ready.
EXPOSE 7878 7879 9464
ENTRYPOINT ["/usr/bin/htamd", "--config", "/etc/htam/htamd.conf", "--general.data_dir", "/var/lib/htam"]
# Non-loopback binds need CURVE: mount the key files (htam-keygen) under /etc/htam/keys.
CMD ["--server.bind", "tcp://0.0.0.0:7878", "--server.curve", "true", \
     "--server.curve_secret_key_file", "/etc/htam/keys/server.key", \
     "--server.curve_authorized_keys", "/etc/htam/keys/clients", \
     "--worker.endpoint", "tcp://0.0.0.0:7879", "--worker.curve", "true", \
     "--worker.curve_authorized_keys", "/etc/htam/keys/workers", \
     "--server.metrics_endpoint", "0.0.0.0:9464"]
