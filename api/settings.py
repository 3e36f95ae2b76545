"""Settings of the HTTP layer: the parts of the typed settings (:class:`gitmem.config.values.Config`) the
app runs with, which the app factory reads where the server starts.

A field that is also a setting has no default here: its default lives once, in the settings table
(:mod:`gitmem.config.settings`), and :meth:`Settings.defaults` reads it from there. Only what no
operator sets (the streamed paths, the wrong-secret bucket) keeps a default of its own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gitmem.agents.dreams.dreamers import Dreamer
from gitmem.config.home import dreamer
from gitmem.config.settings import load_settings
from gitmem.config.values import Config, from_settings
from gitmem.webhooks.delivery import DeliveryPolicy
from gitmem.webhooks.targets import parse_networks


@dataclass(frozen=True, kw_only=True)
class Settings:
    # Bodies larger than this are refused with 413 before they are parsed.
    max_body_bytes: int
    # Paths (regular expressions, matched at the start) whose bodies stream past the limit: Git's
    # smart HTTP, where a push carries a pack of any size.
    unlimited_body_paths: tuple[str, ...] = (r"/v1/memory_stores/[^/]+\.git/",)
    # Per-key token bucket: ``rate_limit_per_second`` tokens refill a bucket of ``rate_limit_burst``.
    # 0 turns rate limiting off. The buckets live in each server process.
    rate_limit_per_second: float
    rate_limit_burst: int
    # Wrong secrets a client address may send at once, then one every 1/rate seconds (api.ratelimit.
    # WrongSecrets); off with rate limiting (rate_limit_per_second 0).
    wrong_secret_burst: int = 20
    wrong_secret_per_second: float = 0.2
    # The retention pruner runs in every server process this often (one process prunes a round; the
    # others skip it). 0 turns the schedule off; `gitmem prune` still works.
    prune_interval_seconds: float
    # Each server process runs pending dreams in a background thread (a claim in the catalog keeps two
    # processes off one dream); off leaves them to other processes.
    dream_runner: bool
    dream_poll_seconds: float
    dreamer: Dreamer | None  # None: the offline tidier
    dream_timeout_seconds: float
    # Webhook delivery: one process at a time (a lease in the catalog) delivers the outbox.
    webhook_delivery: bool
    webhook_poll_seconds: float
    webhook_policy: DeliveryPolicy
    # /metrics: off (404) unless a token is set; a scrape sends it as a bearer token. ``metrics_dir``:
    # where every worker keeps its values (prometheus_client's multi-process mode), else this process's.
    metrics_token: str | None = field(repr=False)
    metrics_dir: Path | None
    # The server's own access log (one JSON line a request), for GITMEM_LOG_FORMAT=json.
    access_log: bool
    # /readyz: the home's file system must keep this much free.
    ready_min_free_bytes: int
    # A graceful stop (api/draining.py): seconds of 503 before the server stops accepting, then at
    # most ``stop_timeout_seconds`` for the requests in flight and the background threads.
    drain_seconds: float
    stop_timeout_seconds: float

    @classmethod
    def defaults(cls, **changes: Any) -> Settings:
        """The settings table's defaults (no environment read), with ``changes``: what tests and
        embedders start from."""
        return replace(cls.from_env({}), **changes)

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
