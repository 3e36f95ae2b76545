"""Settings of the HTTP layer, read from the environment by the module-level app."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gitmem.agents.dreams.dreamers import Dreamer
from gitmem.agents.dreams.ledger import DEFAULT_DREAM_TIMEOUT
from gitmem.config.home import dream_timeout, dreamer
from gitmem.config.settings import GitmemSettings, load_settings
from gitmem.config.values import Values, from_settings
from gitmem.webhooks.delivery import DeliveryPolicy

MIB = 1 << 20


@dataclass(frozen=True)
class Settings:
    # Bodies larger than this are refused with 413 before they are parsed. A note is at most
    # 100 KiB, so 1 MiB leaves room for JSON escaping (a note of control characters doubles).
    max_body_bytes: int = MIB
    # Paths (regular expressions, matched at the start) whose bodies stream past the limit: Git's
    # smart HTTP, where a push carries a pack of any size.
    unlimited_body_paths: tuple[str, ...] = (r"/v1/memory_stores/[^/]+\.git/",)
    # Per-key token bucket: ``rate_limit_per_second`` tokens refill a bucket of ``rate_limit_burst``.
    # 0 turns rate limiting off. The buckets live in each server process.
    rate_limit_per_second: float = 200.0
    rate_limit_burst: int = 400
    # Wrong secrets a client address may send at once, then one every 1/rate seconds (api.ratelimit.
    # WrongSecrets); off with rate limiting (rate_limit_per_second 0).
    wrong_secret_burst: int = 20
    wrong_secret_per_second: float = 0.2
    # The retention pruner runs in every server process this often (one process prunes a round; the
    # others skip it). 0 turns the schedule off; `gitmem prune` still works.
    prune_interval_seconds: float = 3600.0
    # Each server process runs pending dreams in a background thread (a claim in the catalog keeps two
    # processes off one dream); off leaves them to other processes.
    dream_runner: bool = True
    dream_poll_seconds: float = 1.0
    dreamer: Dreamer | None = None  # None: the offline tidier
    dream_timeout_seconds: float = DEFAULT_DREAM_TIMEOUT
    # Webhook delivery: one process at a time (a lease in the catalog) delivers the outbox.
    webhook_delivery: bool = True
    webhook_poll_seconds: float = 1.0
    webhook_policy: DeliveryPolicy = field(default_factory=DeliveryPolicy)
    # /metrics: off (404) unless a token is set; a scrape sends it as a bearer token. ``metrics_dir``:
    # where every worker keeps its values (prometheus_client's multi-process mode), else this process's.
    metrics_token: str | None = field(default=None, repr=False)
    metrics_dir: Path | None = None
    # The server's own access log (one JSON line a request), for GITMEM_LOG_FORMAT=json.
    access_log: bool = False
    # /readyz: the home's file system must keep this much free.
    ready_min_free_bytes: int = 256 * MIB
    # A graceful stop (api/draining.py): seconds of 503 before the server stops accepting, then at
    # most ``stop_timeout_seconds`` for the requests in flight and the background threads.
    drain_seconds: float = 0.0
    stop_timeout_seconds: float = 20.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """From the one settings object (:mod:`gitmem.config.settings`), which checks every value."""
        settings = load_settings(environ)
        return cls.from_values(settings, from_settings(settings))

    @classmethod
    def from_values(cls, settings: GitmemSettings, values: Values) -> Settings:
        return cls(
            max_body_bytes=settings.MAX_BODY_BYTES,
            rate_limit_per_second=settings.RATE_LIMIT_RPS,
            rate_limit_burst=settings.RATE_LIMIT_BURST,
            prune_interval_seconds=settings.PRUNE_INTERVAL,
            dream_runner=settings.DREAM_RUNNER,
            dream_poll_seconds=settings.DREAM_POLL,
            dreamer=dreamer(values),
            dream_timeout_seconds=dream_timeout(values),
            webhook_delivery=settings.WEBHOOKS,
            webhook_poll_seconds=settings.WEBHOOK_POLL,
            webhook_policy=DeliveryPolicy(
                first_retry_seconds=settings.WEBHOOK_FIRST_RETRY,
                max_retry_seconds=settings.WEBHOOK_MAX_RETRY,
                give_up_after_seconds=settings.WEBHOOK_GIVE_UP_AFTER,
                timeout_seconds=settings.WEBHOOK_TIMEOUT,
                concurrency=settings.WEBHOOK_CONCURRENCY,
                allow_networks=settings.webhook_allow_networks,
            ),
            metrics_token=settings.METRICS_TOKEN.get_secret_value().strip() if settings.METRICS_TOKEN else None,
            metrics_dir=settings.METRICS_DIR,
            access_log=settings.LOG_FORMAT == "json",
            ready_min_free_bytes=settings.READY_MIN_FREE_BYTES,
            drain_seconds=settings.DRAIN_SECONDS,
            stop_timeout_seconds=settings.STOP_TIMEOUT,
        )
