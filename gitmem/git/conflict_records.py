"""A conflict is a commit too: the record of a write that lost a race, and of its resolution.

Each note with conflicts has one ref, ``refs/conflicts/<memory id>``: a line of commits, newest first,
off ``main`` (no commit of it is on ``main``, nor has ``main`` for a parent). A **conflict record** is a
commit whose tree holds the losing text at the note's tree path (nothing for a delete, nor for a move
without new text), authored by the actor whose write lost, at the time it was refused; a **resolution
record** is a commit with the empty tree, authored by whoever resolved it. Their trailers::

    conflict: modified /people/sam.md lost to memver_01JD...

    Conflict-Id: cnf_01JD...
    Memory-Id: mem_01JD...
    Conflict-Operation: modified          (what the losing write tried: modified, moved or deleted)
    Memory-Path: /people/sam.md           (the path it asked for)
    Content-SHA256: 3a7b...               (of the losing text; absent for a delete)
    Content-Size: 312
    Base-SHA256: 91c2...                  (the precondition it was refused on; or Base-Blob)
    Winner-Version: memver_01JD...        (the note's version when it was refused)
    Winner-SHA256: 5e0f...
    Created-By: api_actor api_key_id=apikey_01JD...
    Created-At: 2026-11-29T13:53:47.193447Z

    resolve cnf_01JD... (loser)

    Conflict-Resolved: cnf_01JD...
    Conflict-Resolution: loser             (winner, loser or merged)
    Resolved-Version: memver_01JD...       (the version the resolution wrote; none for the winner)
    Resolved-By: user_actor user_id=user_01JD...
    Resolved-At: 2026-11-29T14:02:11.000001Z

A redacted conflict keeps its id, note, operation, author and time; its path, content and hashes leave
the record (``Redacted-At``, ``Redacted-By``) and its tree is empty. As with versions, ids live in
trailers because a rewrite (retention, redaction, key rotation) makes every commit of the line anew.
This module is the format alone: no repository is read or written here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Literal

from gitmem.clock import iso
from gitmem.git.commits import actor_text, parse_time
from gitmem.model import Actor

CONFLICTS_PREFIX = "refs/conflicts/"
CONFLICT = "cnf"  # the id prefix

LostOperation = Literal["modified", "moved", "deleted"]
LOST_OPERATIONS: tuple[LostOperation, ...] = ("modified", "moved", "deleted")
Resolution = Literal["winner", "loser", "merged"]
RESOLUTIONS: tuple[Resolution, ...] = ("winner", "loser", "merged")


def conflict_ref(memory_id: str) -> str:
    return CONFLICTS_PREFIX + memory_id


def memory_id_of(ref: str) -> str | None:
    """The note a conflict ref belongs to (None for a name that is not one)."""
    if not ref.startswith(CONFLICTS_PREFIX):
        return None
    rest = ref[len(CONFLICTS_PREFIX) :]
    return rest if rest and "/" not in rest else None


@dataclass(frozen=True)
class ConflictRecord:
    """What a refused write asked for, on what base, and what it lost to."""

    conflict_id: str
    memory_id: str
    operation: LostOperation
    path: str | None  # None once redacted
    content_sha256: str | None  # None for a delete or a move, or once redacted
    content_size: int | None
    base_sha256: str | None  # the precondition: a content hash ...
    base_blob: str | None  # ... or a blob id (If-Match)
    winner_version: str
    winner_sha256: str | None
    created_by: Actor | None
    created_at: dt.datetime
    redacted_at: dt.datetime | None = None
    redacted_by: Actor | None = None

    @property
    def has_content(self) -> bool:
        return self.operation == "modified" and self.redacted_at is None

    def retry_key(self) -> tuple[object, ...]:
        """What makes two refused writes the same retry: same writer, same text, same path, same base."""
        return (
            self.operation,
            self.path,
            self.content_sha256,
            self.base_sha256,
            self.base_blob,
            self.created_by.trailer() if self.created_by else None,
        )

    def redacted(self, when: dt.datetime, by: Actor | None) -> ConflictRecord:
        return replace(
            self,
            path=None,
            content_sha256=None,
            content_size=None,
            base_sha256=None,
            base_blob=None,
            winner_sha256=None,
            redacted_at=when,
            redacted_by=by,
        )


@dataclass(frozen=True)
class ResolutionRecord:
    """A conflict marked resolved: which side was taken, by whom, and the version that wrote it."""

    conflict_id: str
    resolution: Resolution
    version_id: str | None
    resolved_by: Actor | None
    resolved_at: dt.datetime


Record = ConflictRecord | ResolutionRecord


def _optional(pairs: list[tuple[str, str]], key: str, value: object) -> None:
    if value is not None:
        pairs.append((key, str(value)))


def trailers(record: Record) -> list[tuple[str, str]]:
    if isinstance(record, ResolutionRecord):
        return [
            ("Conflict-Resolved", record.conflict_id),
            ("Conflict-Resolution", record.resolution),
            ("Resolved-Version", record.version_id or "none"),
            ("Resolved-By", actor_text(record.resolved_by)),
            ("Resolved-At", iso(record.resolved_at)),
        ]
    pairs = [
        ("Conflict-Id", record.conflict_id),
        ("Memory-Id", record.memory_id),
        ("Conflict-Operation", record.operation),
    ]
    _optional(pairs, "Memory-Path", record.path)
    _optional(pairs, "Content-SHA256", record.content_sha256)
    _optional(pairs, "Content-Size", record.content_size)
    _optional(pairs, "Base-SHA256", record.base_sha256)
    _optional(pairs, "Base-Blob", record.base_blob)
    pairs.append(("Winner-Version", record.winner_version))
    _optional(pairs, "Winner-SHA256", record.winner_sha256)
    pairs += [("Created-By", actor_text(record.created_by)), ("Created-At", iso(record.created_at))]
    if record.redacted_at is not None:
        pairs += [("Redacted-At", iso(record.redacted_at)), ("Redacted-By", actor_text(record.redacted_by))]
    return pairs


def subject(record: Record) -> str:
    if isinstance(record, ResolutionRecord):
        return f"resolve {record.conflict_id} ({record.resolution})"
    if record.redacted_at is not None:
        return f"conflict: {record.operation} (redacted)"
    return f"conflict: {record.operation} {record.path} lost to {record.winner_version}"


def format_message(record: Record) -> str:
    return subject(record) + "\n\n" + "\n".join(f"{k}: {v}" for k, v in trailers(record)) + "\n"


def _fields(message: str) -> dict[str, str]:
    found: dict[str, str] = {}
    _subject, _, body = message.partition("\n\n")
    for line in body.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key and " " not in key:
            found[key] = value.strip()
    return found


def parse_message(message: str) -> Record | None:
    """The record a commit message holds; None for a message that is neither kind."""
    f = _fields(message)
    try:
        if "Conflict-Resolved" in f:
            resolution = f["Conflict-Resolution"]
            if resolution not in RESOLUTIONS:
                return None
            version = f.get("Resolved-Version")
            return ResolutionRecord(
                conflict_id=f["Conflict-Resolved"],
                resolution=resolution,
                version_id=None if version in (None, "none") else version,
                resolved_by=Actor.from_trailer(f.get("Resolved-By", "")),
                resolved_at=parse_time(f["Resolved-At"]),
            )
        if "Conflict-Id" not in f or f.get("Conflict-Operation") not in LOST_OPERATIONS:
            return None
        return ConflictRecord(
            conflict_id=f["Conflict-Id"],
            memory_id=f["Memory-Id"],
            operation=f["Conflict-Operation"],  # type: ignore[arg-type]
            path=f.get("Memory-Path"),
            content_sha256=f.get("Content-SHA256"),
            content_size=int(f["Content-Size"]) if "Content-Size" in f else None,
            base_sha256=f.get("Base-SHA256"),
            base_blob=f.get("Base-Blob"),
            winner_version=f["Winner-Version"],
            winner_sha256=f.get("Winner-SHA256"),
            created_by=Actor.from_trailer(f.get("Created-By", "")),
            created_at=parse_time(f["Created-At"]),
            redacted_at=parse_time(f["Redacted-At"]) if "Redacted-At" in f else None,
            redacted_by=Actor.from_trailer(f.get("Redacted-By", "")),
        )
    except (KeyError, ValueError):
        return None


__all__ = [
    "CONFLICT",
    "CONFLICTS_PREFIX",
    "RESOLUTIONS",
    "ConflictRecord",
    "LostOperation",
    "Record",
    "Resolution",
    "ResolutionRecord",
    "conflict_ref",
    "format_message",
    "memory_id_of",
    "parse_message",
]
