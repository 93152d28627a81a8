"""What an operator watches: the access log, Prometheus metrics and per-key rate limits.

The access log is one JSON line per request on the ``memvault.server.access`` logger: time,
request id, API key id, route template (never the URL: it carries ids, paths and cursors),
method, status, latency and the memory store id. Never content, paths or secrets.

Metrics (``prometheus-client``): ``memvault_requests_total{route,method,status}``,
``memvault_request_seconds{route}``, ``memvault_commits_total{kind}``,
``memvault_open_stores``, and for the background gc of a root in object storage
``memvault_gc_runs_total{outcome}``, ``memvault_gc_seconds`` and
``memvault_gc_deleted_objects_total``. With several worker processes, ``memvault serve`` points
``PROMETHEUS_MULTIPROC_DIR`` at a private directory and ``/metrics`` adds up every worker.

Rate limits: a token bucket per API key and process (``rate`` requests per second, bursts of
``burst``); over it, 429 with ``retry-after``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess

from .compaction import GcRun
from .errors import ApiError

__all__ = ["AccessLog", "Metrics", "RateLimiter"]

_access = logging.getLogger("memvault.server.access")


class AccessLog:
    """Writes the access log's lines."""

    def write(self, **fields: Any) -> None:
        if _access.isEnabledFor(logging.INFO):
            _access.info(json.dumps({"time": round(time.time(), 3), **fields}, sort_keys=True))


class Metrics:
    """The server's Prometheus metrics (a registry of their own, or the multiprocess one)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        multiproc = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        # In multiprocess mode values go to files in PROMETHEUS_MULTIPROC_DIR; the collector sums them.
        kwargs: dict[str, Any] = {"registry": None if multiproc else self.registry}
        self.requests = Counter("memvault_requests", "Requests answered", ["route", "method", "status"], **kwargs)
        self.latency = Histogram(
            "memvault_request_seconds", "Time to answer a request", ["route"], **kwargs,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
        )  # fmt: skip
        self.commits = Counter("memvault_commits", "Commits made through the server", ["kind"], **kwargs)
        self.open_stores = Gauge("memvault_open_stores", "Memory stores open in this process", **kwargs,
                                 multiprocess_mode="livesum")  # fmt: skip
        self.gc_runs = Counter("memvault_gc_runs", "Background gc steps by outcome", ["outcome"], **kwargs)
        self.gc_seconds = Histogram(
            "memvault_gc_seconds", "Time of a background gc run", **kwargs,
            buckets=(0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0),
        )  # fmt: skip
        self.gc_deleted = Counter("memvault_gc_deleted_objects", "Objects a background gc deleted", **kwargs)
        if multiproc:
            multiprocess.MultiProcessCollector(self.registry)  # type: ignore[no-untyped-call]

    def commit(self, kind: str) -> None:
        """Count one commit of ``kind``."""
        self.commits.labels(kind).inc()

    def gc_run(self, run: GcRun) -> None:
        """Count one step of the background gc (its time only for a run that opened the store)."""
        self.gc_runs.labels(run.outcome).inc()
        if run.outcome in ("compacted", "current", "failed"):
            self.gc_seconds.observe(run.seconds)
        if run.deleted:
            self.gc_deleted.inc(run.deleted)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one answered request."""
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def render(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)


class RateLimiter:
    """A token bucket per key: ``rate`` requests per second, bursts of ``burst`` (0: no limit)."""

    def __init__(self, rate: float = 0.0, burst: int = 0) -> None:
        self.rate = rate
        self.burst = max(burst, 1) if rate > 0 else 0
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key_id: str) -> None:
        """Take one token for ``key_id`` or raise a 429 :class:`ApiError`."""
        if self.rate <= 0:
            return
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key_id, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens < 1.0:
                self._buckets[key_id] = (tokens, now)
                wait = (1.0 - tokens) / self.rate
                raise ApiError(429, "rate_limit_error", "This API key sent too many requests; slow down.",
                               retry_after=wait)  # fmt: skip
            self._buckets[key_id] = (tokens - 1.0, now)
