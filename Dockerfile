# egressd's image. Build: tools/image.sh (buildah; the bookworm base is made locally
# with debootstrap, no registry needed). Run: egressd is the entrypoint and handles
# SIGTERM itself (it drains fetches under way for --shutdown_grace, then exits 0).

# Build stage: Bazel against Debian's libraries, as on a developer's machine.
FROM debian:bookworm AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      bazel-bootstrap g++ pkg-config ca-certificates \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libboost1.81-dev libboost-url1.81-dev libssl-dev libabsl-dev prometheus-cpp-dev \
      libc-ares-dev libhiredis-dev libnghttp2-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN bazel build //service:egressd \
 && install -m 0755 bazel-bin/service/egressd /egressd \
 && bazel shutdown

# Runtime stage: the binary and the shared libraries it links, nothing else.
FROM debian:bookworm
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates libgrpc++1.51 libgrpc29 libprotobuf32 libssl3 libabsl20220623 \
      libboost-url1.81.0 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libcivetweb1 \
      libre2-9 libc-ares2 libhiredis0.14 libnghttp2-14 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/* /usr/share/doc/* /usr/share/man/*
COPY --from=build /egressd /usr/local/bin/egressd
USER 65532:65532
EXPOSE 50051 9464
ENTRYPOINT ["/usr/local/bin/egressd"]
CMD ["--grpc_listen=0.0.0.0:50051", "--metrics_listen=0.0.0.0:9464"]
