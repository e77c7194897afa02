# Engram container: a static-ish release binary on a slim Debian base.
# Build: docker build -t engram .    Run: docker run -p 8080:8080 -v engram-data:/data engram
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY migrations ./migrations
COPY benches ./benches
RUN cargo build --release --locked --bin engram

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /data engram \
 && mkdir -p /data && chown engram /data
COPY --from=build /src/target/release/engram /usr/local/bin/engram
USER engram
WORKDIR /data
ENV ENGRAM_BIND=0.0.0.0:8080 \
    ENGRAM_DATA_DIR=/data \
    ENGRAM_LOG_FORMAT=json
EXPOSE 8080
VOLUME ["/data"]
ENTRYPOINT ["engram"]
CMD ["serve"]
