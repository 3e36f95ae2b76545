"""A version is a commit: its message, trailers and author (docs/architecture.md).

Ids live in trailers because history rewriting changes commit ids; trailers survive, like Gerrit's
``Change-Id``. pygit2's ``message_trailers`` collapses repeated keys, so the block is parsed here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

import pygit2

from gitmem.clock import iso
from gitmem.git.pack.format import PackObject
from gitmem.git.repository import COMMITTER
from gitmem.git.signing import Signer, signed_commit
from gitmem.git.trees import commit_body
from gitmem.model import Actor, Operation

SERVICE = "service"


@dataclass(frozen=True)
class VersionRecord:
    """Everything a version commit says about one change to one note."""

    memory_id: str
    version_id: str
    operation: Operation
    path: str | None  # None once redacted
    content_sha256: str | None
    content_size: int | None
    created_by: Actor | None
    created_at: dt.datetime
    note_created_at: dt.datetime
    redacted_at: dt.datetime | None = None
    redacted_by: Actor | None = None

    def redacted(self, when: dt.datetime, by: Actor | None) -> VersionRecord:
        return replace(self, path=None, content_sha256=None, content_size=None, redacted_at=when, redacted_by=by)


def actor_text(actor: Actor | None) -> str:
    """An actor as a trailer's value; the service itself is ``service``."""
    return actor.trailer() if actor else SERVICE


def parse_time(text: str) -> dt.datetime:
    """A trailer's time (RFC 3339, ``Z``)."""
    return dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))


def trailers(record: VersionRecord) -> list[tuple[str, str]]:
    pairs = [
        ("Memory-Id", record.memory_id),
        ("Memory-Version", record.version_id),
        ("Memory-Operation", record.operation),
    ]
    if record.path is not None:
        pairs.append(("Memory-Path", record.path))
    if record.content_sha256 is not None:
        pairs.append(("Content-SHA256", record.content_sha256))
        pairs.append(("Content-Size", str(record.content_size)))
    pairs += [
        ("Created-By", actor_text(record.created_by)),
        ("Created-At", iso(record.created_at)),
        ("Memory-Created-At", iso(record.note_created_at)),
    ]
    if record.redacted_at is not None:
        pairs += [("Redacted-At", iso(record.redacted_at)), ("Redacted-By", actor_text(record.redacted_by))]
    return pairs


def format_message(records: list[VersionRecord]) -> str:
    first = records[0]
    if len(records) > 1:
        subject = f"{len(records)} changes"
    elif first.redacted_at is not None:
        subject = f"{first.operation} (redacted)"
    else:
        subject = f"{first.operation} {first.path}"
    blocks = ["\n".join(f"{k}: {v}" for k, v in trailers(r)) for r in records]
    return subject + "\n\n" + "\n\n".join(blocks) + "\n"


def parse_message(message: str) -> list[VersionRecord]:
    """The version records in a commit message (several for a multi-change commit); [] if none."""
    records: list[VersionRecord] = []
    for block in message.split("\n\n")[1:]:
        fields: dict[str, str] = {}
        for line in block.strip().splitlines():
            key, sep, value = line.partition(": ")
            if sep:
                fields[key.strip()] = value.strip()
        if "Memory-Id" not in fields or "Memory-Version" not in fields:
            continue
        created_at = parse_time(fields["Created-At"])
        records.append(
            VersionRecord(
                memory_id=fields["Memory-Id"],
                version_id=fields["Memory-Version"],
                operation=fields["Memory-Operation"],  # type: ignore[arg-type]
                path=fields.get("Memory-Path"),
                content_sha256=fields.get("Content-SHA256"),
                content_size=int(fields["Content-Size"]) if "Content-Size" in fields else None,
                created_by=Actor.from_trailer(fields.get("Created-By", "")),
                created_at=created_at,
                note_created_at=parse_time(fields.get("Memory-Created-At", fields["Created-At"])),
                redacted_at=parse_time(fields["Redacted-At"]) if "Redacted-At" in fields else None,
                redacted_by=Actor.from_trailer(fields.get("Redacted-By", "")),
            )
        )
    return records


def commit_object(
    tree: bytes, parent: bytes | None, author: pygit2.Signature, message: str, signer: Signer | None = None
) -> PackObject:
    """A commit gitmem writes into a pack (a version on ``main``, a conflict beside it): committed by
    gitmem at the author's time, signed by ``signer`` (:mod:`gitmem.git.signing`). The one place such
    commits are made."""
    committer = pygit2.Signature(COMMITTER.name, COMMITTER.email, author.time, 0)
    body = commit_body(tree, [parent] if parent is not None else [], author, committer, message)
    return signed_commit(body, signer)


def author_for(actor: Actor | None, when: dt.datetime) -> pygit2.Signature:
    """The commit author: the actor, so ``git log --format='%ad %an %s'`` reads as an audit."""
    seconds = int(when.timestamp())
    if actor is None:
        return pygit2.Signature("gitmem", "gitmem@localhost", seconds, 0)
    domain = actor.type.removesuffix("_actor")
    return pygit2.Signature(actor.id, f"{actor.id}@{domain}.gitmem", seconds, 0)
