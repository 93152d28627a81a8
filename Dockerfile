# memvault's memory-stores server. Build: docker build -t memvault .
# Run (a root in the volume /data, the key from a file mounted as a secret):
#   docker run -p 127.0.0.1:8080:8080 -v memvault-data:/data \
#     -v /path/to/master.key:/run/secrets/memvault-key:ro -e MEMVAULT_KEY_FILE=/run/secrets/memvault-key memvault
# The container listens on all its interfaces (--allow-remote): publish the port on loopback only, or put a
# TLS-terminating proxy in front (docs/server.md). See deploy/compose.yaml for several servers on one S3 root.
FROM python:3.12-slim

RUN useradd --create-home --uid 10001 memvault && mkdir -p /data && chown memvault /data
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir ".[server,s3,kms]" && rm -rf /src

USER memvault
ENV MEMVAULT_ROOT=/data/root \
    MEMVAULT_CACHE_DIR=/data/cache \
    PYTHONUNBUFFERED=1
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz')" || exit 1
# `memvault server init "$MEMVAULT_ROOT"` once (deploy/compose.yaml runs it as a one-shot service), then serve.
ENTRYPOINT ["sh", "-c", "exec memvault serve \"$MEMVAULT_ROOT\" --host 0.0.0.0 --allow-remote --port 8080 \"$@\"", "--"]
