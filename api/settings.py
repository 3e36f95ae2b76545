"""Settings of the HTTP layer, read from the environment by the module-level app."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from gitmem.webhook_delivery import DeliveryPolicy

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
    # The retention pruner runs in every server process this often (one process prunes a round; the
    # others skip it). 0 turns the schedule off; `gitmem prune` still works.
    prune_interval_seconds: float = 3600.0
    # Each server process runs pending dreams in a background thread (a claim in the catalog keeps two
    # processes off one dream); off leaves them to other processes.
    dream_runner: bool = True
    dream_poll_seconds: float = 1.0
    # Webhook delivery: one process at a time (a lease in the catalog) delivers the outbox.
    webhook_delivery: bool = True
    webhook_poll_seconds: float = 1.0
    webhook_policy: DeliveryPolicy = field(default_factory=DeliveryPolicy)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        defaults = cls()
        return cls(
            max_body_bytes=int(env.get("GITMEM_MAX_BODY_BYTES", defaults.max_body_bytes)),
            rate_limit_per_second=float(env.get("GITMEM_RATE_LIMIT_RPS", defaults.rate_limit_per_second)),
            rate_limit_burst=int(env.get("GITMEM_RATE_LIMIT_BURST", defaults.rate_limit_burst)),
            prune_interval_seconds=float(env.get("GITMEM_PRUNE_INTERVAL", defaults.prune_interval_seconds)),
            dream_runner=env.get("GITMEM_DREAM_RUNNER", "on").strip().lower() not in ("0", "off", "false", "no"),
            dream_poll_seconds=float(env.get("GITMEM_DREAM_POLL") or defaults.dream_poll_seconds),
            webhook_delivery=env.get("GITMEM_WEBHOOKS", "on").strip().lower() not in ("0", "off", "false", "no"),
            webhook_poll_seconds=float(env.get("GITMEM_WEBHOOK_POLL") or defaults.webhook_poll_seconds),
            webhook_policy=DeliveryPolicy(
                first_retry_seconds=float(env.get("GITMEM_WEBHOOK_FIRST_RETRY") or 5.0),
                max_retry_seconds=float(env.get("GITMEM_WEBHOOK_MAX_RETRY") or 3600.0),
                give_up_after_seconds=float(env.get("GITMEM_WEBHOOK_GIVE_UP_AFTER") or 3 * 86400.0),
                timeout_seconds=float(env.get("GITMEM_WEBHOOK_TIMEOUT") or 10.0)),
        )
