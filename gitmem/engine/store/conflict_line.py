"""A note's conflict line in Git (``refs/conflicts/<memory id>``, :mod:`gitmem.git.conflict_records`): its
commits read back as :class:`Conflict` values, and the objects a new record is made of. What is kept
when, and who sees it, is :mod:`gitmem.engine.store.conflicts`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Literal

import pygit2

from gitmem.clock import from_micros, to_micros
from gitmem.git import repository
from gitmem.git.commits import author_for, commit_object
from gitmem.git.conflict_records import (
    CONFLICTS_PREFIX,
    ConflictRecord,
    LostOperation,
    Record,
    Resolution,
    ResolutionRecord,
    conflict_ref,
    format_message,
    memory_id_of,
    parse_message,
)
from gitmem.git.pack.format import PackObject
from gitmem.git.signing import Signer
from gitmem.git.trees import EMPTY_TREE_ID, TreeCache, TreeStore, object_id
from gitmem.model import Actor
from gitmem.rules.paths import git_path

State = Literal["open", "resolved"]


@dataclass(frozen=True)
class Conflict:
    """A kept conflict with its resolution, as the API and the web view show it."""

    id: str
    store_id: str
    memory_id: str
    operation: LostOperation
    path: str | None
    content_sha256: str | None
    content_size_bytes: int | None
    base_sha256: str | None
    base_blob_id: str | None
    winner_version_id: str
    winner_sha256: str | None
    created_by: Actor | None
    created_at: dt.datetime
    record_id: str  # the conflict record's commit on refs/conflicts/<memory id>
    resolution: Resolution | None = None
    resolved_version_id: str | None = None
    resolved_by: Actor | None = None
    resolved_at: dt.datetime | None = None
    redacted_at: dt.datetime | None = None
    redacted_by: Actor | None = None
    content: str | None = None

    @property
    def state(self) -> State:
        return "resolved" if self.resolution is not None else "open"


@dataclass(frozen=True)
class Entry:
    """One commit of a note's conflict line: its record and the tree it holds."""

    commit_id: str
    tree_id: str
    record: Record


def read_line(repo: pygit2.Repository, memory_id: str) -> list[Entry]:
    """The records of ``memory_id``'s conflict line, oldest first."""
    ref = repo.references.get(conflict_ref(memory_id))
    if ref is None:
        return []
    return list(reversed(list(_walk(repo, repository.direct_target(ref)))))


def _walk(repo: pygit2.Repository, tip: pygit2.Oid) -> Iterator[Entry]:
    commit: pygit2.Commit | None = repository.commit_at(repo, tip)
    while commit is not None:
        record = parse_message(commit.message)
        if record is not None:
            yield Entry(str(commit.id), str(commit.tree_id), record)
        commit = commit.parents[0] if commit.parents else None


def noted_ids(repo: pygit2.Repository) -> list[str]:
    """The notes that have a conflict line, in id order."""
    names = (memory_id_of(name) for name in repo.references if name.startswith(CONFLICTS_PREFIX))
    return sorted(name for name in names if name is not None)


def conflict_commit(record: Record, tree: bytes, parent: bytes | None, signer: Signer | None = None) -> PackObject:
    """A record's commit: authored by the actor (the loser, or the resolver) at the record's time,
    signed by ``signer``."""
    if isinstance(record, ResolutionRecord):
        actor, when = record.resolved_by, record.resolved_at
    else:
        actor, when = record.created_by, record.created_at
    return commit_object(tree, parent, author_for(actor, when), format_message(record), signer)


def content_tree(path: str, blob: bytes) -> tuple[bytes, list[PackObject]]:
    """The tree holding ``blob`` (encoded content) at ``path``'s tree path, and its objects."""
    trees = TreeStore(TreeCache(), lambda oid: b"")  # built from nothing: nothing is read  # noqa: ARG005  TreeStore's reader signature
    blob_id = object_id(b"blob", blob)
    root = trees.edit(None, {git_path(path): blob_id})
    return root, [PackObject(b"blob", blob, blob_id), *trees.pack_objects()]


EMPTY_TREE_OBJECT = PackObject(b"tree", b"", EMPTY_TREE_ID)


def is_retry(kept: Conflict, new: ConflictRecord) -> bool:
    if kept.redacted_at is not None:
        return False
    key = (kept.operation, kept.path, kept.content_sha256, kept.base_sha256, kept.base_blob_id, who(kept.created_by))
    return key == new.retry_key()


def who(actor: Actor | None) -> str | None:
    return actor.trailer() if actor else None


def conflict_of(store_id: str, r: ConflictRecord, commit_id: str) -> Conflict:
    return Conflict(
        id=r.conflict_id,
        store_id=store_id,
        memory_id=r.memory_id,
        operation=r.operation,
        path=r.path,
        content_sha256=r.content_sha256,
        content_size_bytes=r.content_size,
        base_sha256=r.base_sha256,
        base_blob_id=r.base_blob,
        winner_version_id=r.winner_version,
        winner_sha256=r.winner_sha256,
        created_by=r.created_by,
        created_at=from_micros(to_micros(r.created_at)),
        record_id=commit_id,
        redacted_at=r.redacted_at,
        redacted_by=r.redacted_by,
    )


def conflicts_of_line(store_id: str, line: list[Entry]) -> list[Conflict]:
    """A line's conflicts, each with its resolution (the first one recorded counts)."""
    found: dict[str, Conflict] = {}
    for entry in line:
        r = entry.record
        if isinstance(r, ConflictRecord):
            found.setdefault(r.conflict_id, conflict_of(store_id, r, entry.commit_id))
        elif r.conflict_id in found and found[r.conflict_id].resolution is None:
            found[r.conflict_id] = replace(
                found[r.conflict_id],
                resolution=r.resolution,
                resolved_version_id=r.version_id,
                resolved_by=r.resolved_by,
                resolved_at=r.resolved_at,
            )
    return list(found.values())


def position(c: Conflict) -> tuple[int, str]:
    """Where a conflict sorts: by time, then id (listings run newest first)."""
    return (to_micros(c.created_at), c.id)
