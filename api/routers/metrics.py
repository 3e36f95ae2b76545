"""``GET /metrics``: the node's metrics in Prometheus' text format (docs/deploy.md, "Metrics").

Off (404) unless ``GITMEM_METRICS_TOKEN`` is set; then a scrape sends that token as ``Authorization:
Bearer``. A token of its own rather than an admin key: a key belongs to one workspace, and these
counts are the whole node's, every workspace's traffic together.

A scrape shows the instruments of :mod:`gitmem.metrics` (every worker's, added up from the files of
the multi-process folder, so whichever worker answers gives the same set) and what is read at the
moment of the scrape: the webhook outbox's backlog, dreams by status, the home's free disk. Those last
are the home's (the cluster's, on PostgreSQL): every node reports the same values, so aggregate them
with ``max``, not ``sum``.
"""

from __future__ import annotations

import hmac
import logging
import threading
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from gitmem import metrics
from gitmem.api.auth import request_secret
from gitmem.clock import to_micros
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.readiness import disk_space
from gitmem.errors import AuthenticationFailed
from gitmem.parts import Parts
from gitmem.webhooks.delivery import backlog

log = logging.getLogger("gitmem.api")
router = APIRouter(include_in_schema=False)


@router.get("/metrics")
def scrape(request: Request) -> Response:
    token: str | None = request.app.state.settings.metrics_token
    if not token or not metrics.enabled():
        raise StarletteHTTPException(404)
    secret = request_secret(request.headers)
    if secret is None or not hmac.compare_digest(secret.encode(), token.encode()):
        raise AuthenticationFailed("/metrics needs the metrics token: send Authorization: Bearer <token>")
    from prometheus_client import CONTENT_TYPE_LATEST

    return Response(render(request.app.state.parts), media_type=CONTENT_TYPE_LATEST)


def render(parts: Parts) -> bytes:
    """One scrape: every process's instruments and the home's state, in the text format."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    sample(parts.gm)  # this process's own gauges, fresh; the other workers refresh theirs on a timer
    registry = CollectorRegistry(auto_describe=False)
    folder = metrics.multiprocess_dir()
    if folder is not None:
        MultiProcessCollector(registry, str(folder))
    else:
        registry.register(_ThisProcess())
    registry.register(_HomeState(parts))
    return generate_latest(registry)


_evictions_seen = 0
_sampling = threading.Lock()  # the sampler task and a scrape's thread may look at once


def sample(gm: Gitmem) -> None:
    """Refresh this process's gauges: its free descriptors, and the stores it holds open with the
    evictions since the last look, from the pool of open stores where the engine has one
    (``Gitmem.open_stores()``, issue 27's bounded cache)."""
    global _evictions_seen
    metrics.sample_process()
    open_stores = getattr(gm, "open_stores", None)
    if not callable(open_stores):
        return
    with _sampling:
        stats = open_stores()
        metrics.OPEN_STORES.set(stats.open_stores)
        metrics.STORE_EVICTIONS.inc(max(0, stats.evictions - _evictions_seen))
        _evictions_seen = max(_evictions_seen, stats.evictions)


class _ThisProcess:
    """The instruments of this process alone (no multi-process folder: one server process)."""

    def collect(self) -> Iterator[Any]:
        yield from metrics.registry().collect()


class _HomeState:
    """What a scrape reads from the home: each part on its own, so a catalog that does not answer costs
    its families, not the scrape."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.gm = parts.gm

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        try:
            waiting = backlog(self.gm)
            depth = GaugeMetricFamily(
                "gitmem_webhook_outbox_depth", "Webhook deliveries waiting (neither made nor given up)."
            )
            depth.add_metric([], waiting.depth)
            yield depth
            oldest = GaugeMetricFamily(
                "gitmem_webhook_outbox_oldest_age_seconds", "Age of the oldest event still waiting for delivery."
            )
            age = 0.0 if waiting.oldest_micros is None else (to_micros(self.gm.clock()) - waiting.oldest_micros) / 1e6
            oldest.add_metric([], max(0.0, age))
            yield oldest
        except Exception:
            log.warning("/metrics: the webhook outbox could not be read", exc_info=True)
        try:
            counts = self.parts.dreams.count_by_status()
            dreams = GaugeMetricFamily("gitmem_dreams", "Dreams of the home, by status.", labels=["status"])
            for status, count in counts.items():
                dreams.add_metric([status], count)
            yield dreams
        except Exception:
            log.warning("/metrics: the dreams could not be counted", exc_info=True)
        try:
            space = disk_space(self.gm.home)
        except OSError:
            log.warning("/metrics: the home's disk could not be measured", exc_info=True)
            return
        free = GaugeMetricFamily("gitmem_home_disk_free_bytes", "Bytes free on the home's file system.")
        free.add_metric([], space.free_bytes)
        yield free
        total = GaugeMetricFamily("gitmem_home_disk_size_bytes", "Size of the home's file system.")
        total.add_metric([], space.total_bytes)
        yield total
