"""A store's rewrite log as the audit reads it (the log itself: :mod:`gitmem.git.rewrite_log`): every
retention run, redaction and key rotation, newest first, for ``gitmem log --rewrites`` and the web view."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gitmem.errors import NotFound
from gitmem.git import rewrite_log
from gitmem.git.rewrite_log import LogEntry

if TYPE_CHECKING:
    from gitmem.engine.store.store import MemoryStore


def rewrites(store: MemoryStore) -> list[LogEntry]:
    """Every rewrite of ``store``, newest first."""
    return rewrite_log.read(store.repo)[::-1]


def receipt_for(store: MemoryStore, version_id: str) -> dict[str, Any]:
    """The erasure receipt of the rewrite that dropped or redacted ``version_id`` (the newest such), with
    the rewrite-log entry that holds it (:mod:`gitmem.engine.rewrite.receipts`)."""
    for entry in rewrites(store):
        if entry.receipt is not None and version_id in entry.receipt.get("receipt", {}).get("version_ids", ()):
            return {**entry.receipt, "rewrite_entry": entry.commit_id}
    raise NotFound(f"no erasure receipt for memory version {version_id}")


__all__ = ["LogEntry", "receipt_for", "rewrites"]
