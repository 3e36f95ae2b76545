"""What a history rewrite (or a purge) did: versions kept and dropped, blobs verified gone, bytes, times."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gitmem.model import Actor

RewriteKind = Literal["retention", "redaction", "rotation", "rewrite"]


@dataclass(frozen=True)
class RewriteWhy:
    """Why a history is rewritten, for its entry in the rewrite log (:mod:`gitmem.git.rewrite_log`)."""

    kind: RewriteKind
    reason: str  # in words: "retention window 30 days"; never content or a redacted path
    by: Actor | None = None  # who asked (None: the service itself)


@dataclass
class RewriteReport:
    store_id: str
    dry_run: bool = False
    changed: bool = False
    versions_before: int = 0
    versions_after: int = 0
    dropped: list[str] = field(default_factory=list)  # version ids
    redacted: list[str] = field(default_factory=list)  # version ids newly redacted
    replayed: int = 0  # versions that landed while the rewrite ran, replayed on top
    blobs_purged: list[str] = field(default_factory=list)  # verified unreadable
    blobs_shared: list[str] = field(default_factory=list)  # still used by a kept version: kept
    blobs_unpurged: list[str] = field(default_factory=list)  # should be gone but can still be read
    bytes_before: int = 0
    bytes_after: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    old_tip: str | None = None
    new_tip: str | None = None
    log_entry: str | None = None  # the rewrite's entry on refs/gitmem/rewrites (its commit)

    @property
    def seconds(self) -> float:
        return sum(self.timings.values())
