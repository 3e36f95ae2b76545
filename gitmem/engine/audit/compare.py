"""Today's history against an older clone's (check 4 of :mod:`gitmem.engine.audit.verify`).

Rewrites change commit ids, so the histories are compared version by version (ids live in trailers):
every version the older clone has is in today's history with the same note, operation, path, actor,
time and content, unless the rewrite log (:mod:`gitmem.git.rewrite_log`) records it as dropped, or as
redacted (then its id, note, actor and time stay, its path and content are gone). Content is the same
blob, or, once the log records a key rotation, the same ``Content-SHA256``. No version may appear in
today's history that the older clone should have had (one older than its newest version).
"""

from __future__ import annotations

from gitmem.engine.rewrite.history import Entry
from gitmem.git.rewrite_log import LogEntry

Found = tuple[str | None, str]  # a break: its commit, what is wrong


def _differs(old: Entry, new: Entry, rotated: bool) -> str | None:
    """What of ``old`` today's ``new`` changed (None: nothing), for a version neither dropped nor redacted."""
    a, b = old.record, new.record
    if a.memory_id != b.memory_id or a.operation != b.operation:
        return "its note or operation changed"
    if a.created_at != b.created_at:
        return "its time changed"
    if a.created_by is not None and a.created_by != b.created_by:
        return "its actor changed"
    if b.redacted_at is not None:
        return None  # its path and content are meant to be gone
    if a.redacted_at is None and a.path != b.path:
        return "its path changed"
    if old.blob != new.blob and not (rotated and a.content_sha256 == b.content_sha256):
        return "its content changed"
    return None


def compare(old: list[Entry], today: list[Entry], log: list[LogEntry]) -> tuple[list[Found], str]:
    """Every difference the log does not explain, and what was compared (in words)."""
    found: list[Found] = []
    dropped = {v for entry in log for v in entry.dropped}
    redacted = {v for entry in log for v in entry.redacted}
    rotated = any(entry.kind == "rotation" for entry in log)
    now = {entry.record.version_id: entry for entry in today}
    kept = gone = blanked = 0
    for entry in old:
        version_id = entry.record.version_id
        new = now.get(version_id)
        if new is None:
            gone += 1
            if version_id not in dropped:
                found.append((entry.commit, f"version {version_id} is gone and no rewrite dropped it"))
            continue
        if new.redacted and not entry.redacted:
            blanked += 1
            if version_id not in redacted:
                found.append((new.commit, f"version {version_id} was redacted and no rewrite says so"))
        kept += 1
        why = _differs(entry, new, rotated)
        if why is not None:
            found.append((new.commit, f"version {version_id}: {why} since the older clone"))
    newest = max((entry.record.created_at for entry in old), default=None)
    known = {entry.record.version_id for entry in old}
    for entry in today:
        if newest is not None and entry.record.version_id not in known and entry.record.created_at < newest:
            found.append((entry.commit, f"version {entry.record.version_id} was not in the older clone's history"))
    summary = (
        f"{len(old)} versions of the older clone: {kept} still there as they were ({blanked} redacted since),"
        f" {gone} dropped as the rewrite log records"
    )
    return found, summary


__all__ = ["compare"]
