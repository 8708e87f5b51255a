# egressd's image. Build: tools/image.sh (buildah; the bookworm base is made locally
# with debootstrap, no registry needed). Its build context holds one file, `egressd`: the
# binary Bazel built on Debian 12 (`bazel build //service:egressd`, -c opt), linked
# against the same Debian libraries this image installs. Run: egressd is the entrypoint
# and handles SIGTERM itself (it drains fetches under way for --shutdown_grace, then
# exits 0).
FROM debian:bookworm
# The shared libraries egressd links (`ldd egressd`), nothing else.
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates libgrpc++1.51 libgrpc29 libprotobuf32 libssl3 libabsl20220623 \
      libboost-url1.81.0 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libcivetweb1 \
      libre2-9 libc-ares2 libhiredis0.14 libnghttp2-14 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/* /usr/share/doc/* /usr/share/man/*
COPY egressd /usr/local/bin/egressd
USER 65532:65532
EXPOSE 50051 9464
ENTRYPOINT ["/usr/local/bin/egressd"]
CMD ["--grpc_listen=0.0.0.0:50051", "--metrics_listen=0.0.0.0:9464"]
