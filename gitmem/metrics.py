"""The instruments every layer counts with, for ``/metrics`` (docs/deploy.md, "Metrics").

The engine counts its writes, batches, index catch-ups, searches, repacks and retention runs here
without knowing HTTP; the HTTP layer counts requests; whatever serves ``/metrics`` renders them with
``prometheus_client``. Until :func:`enable` is called every instrument is inert: a call costs one
attribute test, and ``prometheus_client`` is not even imported. A push hook, a CLI command and a
server with metrics off so pay nothing.

:func:`enable` with a folder switches ``prometheus_client`` to its multi-process mode: each process
(each ``gitmem serve --workers N`` worker) writes its values to files of its own in that folder, and
whichever worker answers a scrape adds them up, so every scrape sees one consistent set.

Labels are chosen from small fixed sets (an HTTP method, a route *template*, a status code, an outcome
word), never a store's id or name, a path or a key: what a scrape shows about the home is how busy it
is, not what is in it, and the number of series stays bounded however many stores there are.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

GaugeMode = Literal["livesum", "livemin", "livemax"]

# Seconds, for requests, searches and writers' waits: 1 ms to 10 s.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Seconds, for maintenance (a repack, a retention run): 10 ms to 10 minutes.
SLOW_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)

_lock = threading.Lock()
_registry: Any = None  # prometheus_client's CollectorRegistry once enabled in one process
_multiprocess_dir: Path | None = None


class _Inert:
    """What an instrument's ``labels(...)`` gives while metrics are off: does nothing."""

    def inc(self, amount: float = 1.0) -> None:
        pass

    def observe(self, amount: float) -> None:
        pass

    def set(self, value: float) -> None:
        pass


_INERT = _Inert()


class _Family:
    """One metric family: inert until :func:`enable` makes its ``prometheus_client`` twin. A family
    with labels hands out its children through :meth:`labels`, cached by their values (the label
    sets are small and fixed, and ``prometheus_client``'s own lookup takes a lock every time)."""

    kind = ""

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...] = (), **options: Any) -> None:
        self.name = name
        self.documentation = documentation
        self.label_names = labels
        self.options = options
        self._metric: Any = None
        self._children: dict[tuple[str, ...], Any] = {}
        _FAMILIES.append(self)

    def _make(self, prometheus: Any, registry: Any) -> None:
        cls = {"counter": prometheus.Counter, "gauge": prometheus.Gauge, "histogram": prometheus.Histogram}[self.kind]
        self._metric = cls(self.name, self.documentation, self.label_names, registry=registry, **self.options)
        self._children = {}

    def labels(self, *values: str) -> Any:
        metric = self._metric
        if metric is None:
            return _INERT
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = metric.labels(*values)
        return child


class Counter(_Family):
    kind = "counter"

    def inc(self, amount: float = 1.0) -> None:
        if self._metric is not None and amount:
            self._metric.inc(amount)


class Gauge(_Family):
    kind = "gauge"

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...] = (), *, mode: GaugeMode) -> None:
        super().__init__(name, documentation, labels, multiprocess_mode=mode)

    def set(self, value: float) -> None:
        if self._metric is not None:
            self._metric.set(value)


class Histogram(_Family):
    kind = "histogram"

    def __init__(
        self, name: str, documentation: str, labels: tuple[str, ...] = (), *, buckets: tuple[float, ...]
    ) -> None:
        super().__init__(name, documentation, labels, buckets=buckets)

    def observe(self, amount: float) -> None:
        if self._metric is not None:
            self._metric.observe(amount)

    @contextmanager
    def time(self) -> Iterator[None]:
        """Observe how long the ``with`` block took (nothing is timed while metrics are off)."""
        if self._metric is None:
            yield
            return
        started = time.perf_counter()
        try:
            yield
        finally:
            self._metric.observe(time.perf_counter() - started)


_FAMILIES: list[_Family] = []

# -- HTTP (counted by the API's middleware) --------------------------------------------------------
REQUESTS = Counter(
    "gitmem_http_requests",
    "HTTP requests answered, by method, route template and status.",
    ("method", "route", "status"),
)
REQUEST_SECONDS = Histogram(
    "gitmem_http_request_duration_seconds",
    "Time to answer an HTTP request, by method and route template.",
    ("method", "route"),
    buckets=LATENCY_BUCKETS,
)
RATE_LIMITED = Counter("gitmem_rate_limited", "Requests refused with 429 by the per-key rate limit.")
DRAINING = Gauge("gitmem_draining", "1 while a server process is stopping (it answers 503).", mode="livemax")

# -- writes (the group commit) ----------------------------------------------------------------------
WRITES = Counter(
    "gitmem_writes", "Note writes through the group commit: committed, or refused by their own checks.", ("outcome",)
)
WRITE_BATCH_SIZE = Histogram(
    "gitmem_write_batch_size",
    "Writes committed together in one batch (one pack, one move of main).",
    buckets=BATCH_BUCKETS,
)
WRITE_WAIT_SECONDS = Histogram(
    "gitmem_write_wait_seconds",
    "Time a write waits from joining its store's group commit until a batch takes it.",
    buckets=LATENCY_BUCKETS,
)

# -- the index and search ---------------------------------------------------------------------------
INDEX_CATCH_UPS = Counter("gitmem_index_catch_ups", "Times a store's index replayed commits it had not seen.")
INDEX_CATCH_UP_COMMITS = Counter("gitmem_index_catch_up_commits", "Commits replayed by index catch-ups.")
INDEX_REBUILDS = Counter("gitmem_index_rebuilds", "Times a store's index was rebuilt from its whole history.")
SEARCH_SECONDS = Histogram(
    "gitmem_search_duration_seconds", "Time to answer a search of one store's notes.", buckets=LATENCY_BUCKETS
)

# -- open stores (the bounded cache of issue 27 reports here) ---------------------------------------
OPEN_STORES = Gauge("gitmem_open_stores", "Stores a server process holds open, summed over processes.", mode="livesum")
STORE_EVICTIONS = Counter("gitmem_store_evictions", "Open stores closed to stay within the cache's bounds.")

# -- webhooks, dreams, maintenance ------------------------------------------------------------------
WEBHOOK_DELIVERIES = Counter(
    "gitmem_webhook_deliveries", "Webhook delivery attempts, by outcome (delivered, failed, given_up).", ("outcome",)
)
RETENTION_RUNS = Counter(
    "gitmem_retention_runs",
    "Retention runs of one store, by outcome (ok, skipped, failed).",
    ("outcome",),
)
RETENTION_SECONDS = Histogram(
    "gitmem_retention_run_duration_seconds", "Time a retention run of one store took.", buckets=SLOW_BUCKETS
)
RETENTION_REMOVED_VERSIONS = Counter(
    "gitmem_retention_removed_versions", "Versions retention dropped from stores' histories."
)
RETENTION_REMOVED_BYTES = Counter(
    "gitmem_retention_removed_bytes", "Bytes of repository retention's rewrites and purges gave back."
)
REPACKS = Counter("gitmem_repacks", "Repacks of a store, by kind (roll_up, full).", ("kind",))
REPACK_SECONDS = Histogram(
    "gitmem_repack_duration_seconds", "Time a repack of one store took, by kind.", ("kind",), buckets=SLOW_BUCKETS
)
REPACK_REMOVED_PACKS = Counter("gitmem_repack_removed_packs", "Pack files a repack replaced, by kind.", ("kind",))

# -- the process ------------------------------------------------------------------------------------
FREE_DESCRIPTORS = Gauge(
    "gitmem_process_free_descriptors",
    "File descriptors a server process may still open (the fewest of any process).",
    mode="livemin",
)


def enable(multiprocess_dir: Path | None = None) -> None:
    """Make every instrument count, in this process alone or (with a folder) with every other process
    that enables the same folder. Idempotent; a second call with another folder is a programming error."""
    global _registry, _multiprocess_dir
    with _lock:
        if _registry is not None:
            if multiprocess_dir != _multiprocess_dir:
                raise RuntimeError("metrics are already enabled with another multi-process folder")
            return
        import prometheus_client
        from prometheus_client import values

        if multiprocess_dir is not None:
            # prometheus_client names each process's files from this variable when it makes a value;
            # its multi-process mode is otherwise chosen when it is first imported.
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(multiprocess_dir)
            if not getattr(values.ValueClass, "_multiprocess", False):
                values.ValueClass = values.MultiProcessValue()
        prometheus_client.disable_created_metrics()  # no *_created series: the multi-process mode has none
        registry = prometheus_client.CollectorRegistry(auto_describe=True)
        for family in _FAMILIES:
            family._make(prometheus_client, registry)
        _registry, _multiprocess_dir = registry, multiprocess_dir


def enabled() -> bool:
    return _registry is not None


def multiprocess_dir() -> Path | None:
    return _multiprocess_dir


def registry() -> Any:
    """The registry of this process's instruments (``None`` until :func:`enable`). In multi-process mode
    a scrape reads the folder instead (every process's files), not this."""
    return _registry


def process_stopped() -> None:
    """Forget this process's live gauges (open stores, descriptors, draining) as it exits cleanly, so the
    sums and minimums cover the processes still running. A killed process's values stay until the
    folder is renewed (``gitmem serve`` makes a fresh one each start)."""
    if _multiprocess_dir is not None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid(), str(_multiprocess_dir))


def sample_process() -> None:
    """Refresh this process's own gauges: the descriptors it may still open."""
    if _registry is None:
        return
    free = free_descriptors()
    if free is not None:
        FREE_DESCRIPTORS.set(free)


def free_descriptors() -> int | None:
    """File descriptors this process may still open under its soft limit (``None`` where unknown)."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        used = len(os.listdir("/proc/self/fd")) - 1  # the listing's own descriptor
    except (ImportError, OSError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    return max(0, soft - used)
