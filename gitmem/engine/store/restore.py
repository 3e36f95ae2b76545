"""Restore: one new version that brings back an old version's content and path.

:func:`restore` commits a plan like any other write (:meth:`MemoryStore.commit_plan`), so a restore is an
ordinary write: the store's rules (paths,
limits, secrets), preconditions, path conflicts and the archived-store guard all apply. A deleted
note comes back with its id and its first creation time; restoring what is already there makes no
version.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pygit2

from gitmem import ids
from gitmem.engine.index.store_index import StoreIndex
from gitmem.engine.store.conflicts import StaleWrite
from gitmem.engine.store.group_commit import BatchView, Change
from gitmem.engine.store.store import MemoryStore
from gitmem.engine.store.write_plans import (
    check_free,
    check_moved,
    judged_after_checks,
    lost_write,
    sha256_of,
    stale_precondition,
)
from gitmem.errors import InvalidRequest, NotFound, PreconditionFailed
from gitmem.git.commits import VersionRecord, parse_message
from gitmem.model import Actor, Note, Operation
from gitmem.rules import paths


def restore(
    store: MemoryStore,
    memory_id: str,
    version_id: str,
    *,
    expected_sha256: str | None = None,
    expected_blob_id: str | None = None,
    actor: Actor | None = None,
) -> Note:
    """One new version with ``version_id``'s content at its path; a deleted note comes back with its
    id. Every rule of a write applies."""
    landed = store.commit_plan(restore_plan(store, memory_id, version_id, expected_sha256, expected_blob_id, actor))
    return store.landed_note(landed, memory_id)  # what was written, even where the reader sees less


def restore_plan(
    store: MemoryStore,
    memory_id: str,
    version_id: str,
    expected_sha256: str | None,
    expected_blob_id: str | None,
    actor: Actor | None,
) -> Callable[[BatchView], Change | None]:
    def plan(view: BatchView) -> Change | None:
        index = view.index
        old = index.version(version_id)
        if old is None or old.record.memory_id != memory_id:
            raise NotFound(f"memory version {version_id} of memory {memory_id} not found")
        if old.record.redacted_at is not None:
            raise InvalidRequest(f"memory version {version_id} is redacted: it has no content to restore")
        if old.record.operation == "deleted" or old.blob_id is None or old.record.path is None:
            raise InvalidRequest(f"memory version {version_id} is a deletion: it has no content to restore")
        path = old.record.path
        store.policy.check_path(path)
        data = store.policy.check_content(path, store.codec.decode(path, view.read_blob(old.blob_id)).decode())
        note = index.note(memory_id)
        if note is None:
            if expected_sha256 is not None or expected_blob_id is not None:
                raise PreconditionFailed(f"memory {memory_id} is deleted: it has no current content")
            count, size = check_free(index, path, moving=memory_id)
            store.policy.check_counts(count + 1, size + len(data))
            return _change(
                store, view, memory_id, "created", path, data, None, actor, _created_at(store, index, memory_id)
            )
        if note.path == path and note.sha256 == sha256_of(data):
            return None  # already so: no new version
        stale = stale_precondition(note, expected_sha256, expected_blob_id)
        with judged_after_checks(stale):
            count, size = check_moved(index, note, path)
            store.policy.check_counts(count, size - note.size + len(data))
        if stale is not None:  # the restore lost a race: kept as a conflict, like any other write
            raise StaleWrite(
                stale.message, lost_write(note, "modified", path, data, expected_sha256, expected_blob_id, actor)
            )
        return _change(store, view, memory_id, "modified", path, data, note.path, actor, note.created_at)

    return plan


def _change(
    store: MemoryStore,
    view: BatchView,
    memory_id: str,
    operation: Operation,
    path: str,
    data: bytes,
    old_path: str | None,
    actor: Actor | None,
    note_created_at: dt.datetime,
) -> Change:
    record = VersionRecord(
        memory_id,
        ids.new_id(ids.VERSION),
        operation,
        path,
        sha256_of(data),
        len(data),
        actor,
        store.clock(),
        note_created_at,
    )
    tree_changes: dict[str, str | None] = {}
    if old_path is not None:
        tree_changes[paths.git_path(old_path)] = None
    tree_changes[paths.git_path(path)] = store.planner.blob(view, path, data)
    return Change(record, tree_changes, path_checked_free=path != old_path)  # checked unless it stays


def _created_at(store: MemoryStore, index: StoreIndex, memory_id: str) -> dt.datetime:
    """When a deleted note was first made, as its newest version's commit records it."""
    newest = index.versions_of(memory_id)[-1]
    try:
        commit = store.repo[newest.commit_id]  # no retries: a miss here is expected, not a race
    except KeyError:  # deleted earlier in the same batch: its commit is not in the repository yet
        return newest.record.created_at
    assert isinstance(commit, pygit2.Commit)  # noqa: S101  narrows the type for mypy; never a check of input
    for record in parse_message(commit.message):
        if record.version_id == newest.record.version_id:
            return record.note_created_at
    return newest.record.created_at


__all__ = ["restore_plan"]
