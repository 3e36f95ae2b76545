"""Settings of the HTTP layer: the parts of the typed settings (:class:`gitmem.config.values.Config`) the
app runs with, which the app factory reads where the server starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gitmem.agents.dreams.dreamers import Dreamer
from gitmem.agents.dreams.ledger import DEFAULT_DREAM_TIMEOUT
from gitmem.config.home import dreamer
from gitmem.config.settings import load_settings
from gitmem.config.values import Config, from_settings
from gitmem.webhooks.delivery import DeliveryPolicy
from gitmem.webhooks.targets import parse_networks

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
        return cls.from_config(from_settings(load_settings(environ)))

    @classmethod
    def from_config(cls, config: Config) -> Settings:
        limits, dreams, webhooks, serving = config.limits, config.dreams, config.webhooks, config.serving
        return cls(
            max_body_bytes=limits.max_body_bytes,
            rate_limit_per_second=limits.rate_limit_rps,
            rate_limit_burst=limits.rate_limit_burst,
            prune_interval_seconds=serving.prune_interval,
            dream_runner=dreams.runner,
            dream_poll_seconds=dreams.poll,
            dreamer=dreamer(dreams),
            dream_timeout_seconds=dreams.timeout,
            webhook_delivery=webhooks.deliver,
            webhook_poll_seconds=webhooks.poll,
            webhook_policy=DeliveryPolicy(
                first_retry_seconds=webhooks.first_retry,
                max_retry_seconds=webhooks.max_retry,
                give_up_after_seconds=webhooks.give_up_after,
                timeout_seconds=webhooks.timeout,
                concurrency=webhooks.concurrency,
                allow_networks=parse_networks(webhooks.allow_networks),
            ),
            metrics_token=serving.metrics_token.strip() if serving.metrics_token else None,
            metrics_dir=serving.metrics_dir,
            access_log=serving.log_format == "json",
            ready_min_free_bytes=limits.ready_min_free_bytes,
            drain_seconds=serving.drain_seconds,
            stop_timeout_seconds=serving.stop_timeout,
        )
