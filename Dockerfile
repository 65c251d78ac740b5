# storbench in a container, for `storbench k8s render` (docs/cluster.md).
# Build: docker build -t storbench:0.1.0 .
# The binary links only glibc (SQLite is bundled, TLS is rustls): the
# runtime image adds what media targets need (mkfs, losetup, mount) and fio
# for the side-by-side bench scripts.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p storbench && strip target/release/storbench

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates util-linux e2fsprogs xfsprogs btrfs-progs fio \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/storbench /usr/local/bin/storbench
WORKDIR /work
ENTRYPOINT ["storbench"]
