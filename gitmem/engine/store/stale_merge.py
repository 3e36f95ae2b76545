"""Merge on write (a gitmem extension, off unless a request asks): a content update whose precondition is
stale is merged three ways with the text it lost to instead of refused, when the base it was computed
from is still in the history and the two changes do not overlap (:func:`gitmem.rules.merge.merge3`). The
store writes the merge with the winner as its precondition; otherwise the write is kept as a conflict and
refused as usual. The base's lookup serves a conflict's comparison too.
"""

from __future__ import annotations

import logging

from gitmem.crypto.codec import ContentCodec
from gitmem.engine.index import stored
from gitmem.engine.index.store_index import StoreIndex
from gitmem.engine.store.conflicts import LostWrite
from gitmem.errors import GitmemError
from gitmem.git.repository import blob_at
from gitmem.rules.merge import merge3
from gitmem.rules.policy import StorePolicy

log = logging.getLogger(__name__)

MERGE_LABELS = ("conflict", "base", "note")


def base_text(
    index: StoreIndex, codec: ContentCodec, memory_id: str, base_sha256: str | None, base_blob: str | None
) -> str | None:
    """The text a write's precondition named, if a version of the note still holds it."""
    index.catch_up()
    if base_blob is not None:
        row = index.db.execute(
            "SELECT path FROM versions WHERE memory_id=? AND blob_id=? AND redacted_at IS NULL"
            " ORDER BY seq DESC LIMIT 1",
            (stored.note_key(memory_id, index.dialect), stored.hash_key(base_blob, index.dialect)),
        ).fetchone()
        blob: str | None = base_blob
    elif base_sha256 is not None:
        row = index.db.execute(
            "SELECT path, blob_id FROM versions WHERE memory_id=? AND sha256=? AND redacted_at IS NULL"
            " AND blob_id IS NOT NULL ORDER BY seq DESC LIMIT 1",
            (stored.note_key(memory_id, index.dialect), stored.hash_key(base_sha256, index.dialect)),
        ).fetchone()
        blob = stored.hash_hex(row[1]) if row else None
    else:
        return None
    if row is None or blob is None or row[0] is None:
        return None
    return codec.decode(row[0], blob_at(index.repo, blob).data).decode("utf-8")


def merge_on_write(index: StoreIndex, codec: ContentCodec, policy: StorePolicy, lost: LostWrite) -> bytes | None:
    """The clean three-way merge of a stale content update with the text it lost to, checked by the
    store's rules; None if there is none (no base, overlapping changes, or a merge the rules refuse)."""
    if lost.data is None:
        return None
    base = base_text(index, codec, lost.memory_id, lost.base_sha256, lost.base_blob)
    if base is None:
        return None
    winner = codec.decode(lost.winner_path, blob_at(index.repo, lost.winner_blob).data).decode("utf-8")
    merged = merge3(base, lost.data.decode("utf-8"), winner, labels=MERGE_LABELS)
    if not merged.clean:
        return None
    try:
        return policy.check_content(lost.path, merged.text)
    except GitmemError:  # a merge the rules refuse (too large, a secret's halves joined): keep the conflict
        log.info("the merge of a stale write to %s was refused by the store's rules", lost.memory_id)
        return None


__all__ = ["MERGE_LABELS", "base_text", "merge_on_write"]
