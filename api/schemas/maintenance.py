"""The wire shapes of ``/v1/maintenance``: what the scheduled pruner did last."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel


class StorePruned(BaseModel):
    store_id: str
    retention: str
    versions_before: int
    versions_kept: int
    versions_dropped: int
    blobs_purged: int
    seconds: float
    skipped: str | None
    error: str | None


class RetentionRun(BaseModel):
    type: str = "retention_status"
    interval_seconds: float
    rounds: int
    last_round_at: dt.datetime | None
    stores: list[StorePruned]
