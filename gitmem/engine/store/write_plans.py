"""What a write changes, decided against the tip: the plans that :mod:`gitmem.engine.store.group_commit` runs
for a store's create, update and delete, and the checks each must pass there.

A plan runs inside the batch that commits it, against the tip as the batch's earlier writes left it,
so a precondition, a path collision or a limit is judged on exactly what the write lands on. A plan
that raises fails its own write only; one that returns ``None`` changes nothing (the note is already
so: a retried update that landed).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

from gitmem import ids
from gitmem.clock import Clock
from gitmem.crypto.codec import ContentCodec
from gitmem.engine.index.store_index import NoteRow, StoreIndex
from gitmem.engine.store.conflicts import LostWrite, StaleWrite
from gitmem.engine.store.group_commit import BatchView, Change
from gitmem.errors import GitmemError, NotFound, PathConflict, PreconditionFailed
from gitmem.git.commits import VersionRecord
from gitmem.git.conflict_records import LostOperation
from gitmem.model import Actor
from gitmem.rules import paths
from gitmem.rules.policy import StorePolicy


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def current(index: StoreIndex, memory_id: str) -> NoteRow:
    note = index.note(memory_id)
    if note is None:
        raise NotFound(f"memory {memory_id} not found")
    return note


def stale_precondition(
    note: NoteRow, expected_sha256: str | None, expected_blob_id: str | None
) -> PreconditionFailed | None:
    """The refusal a precondition that no longer holds earns (None if it holds)."""
    if expected_sha256 is not None and expected_sha256 != note.sha256:
        return PreconditionFailed(f"the memory's content_sha256 is {note.sha256}, not {expected_sha256}")
    if expected_blob_id is not None and expected_blob_id != note.blob_id:
        return PreconditionFailed(f"the memory's blob is {note.blob_id}, not {expected_blob_id}")
    return None


def check_precondition(note: NoteRow, expected_sha256: str | None, expected_blob_id: str | None) -> None:
    stale = stale_precondition(note, expected_sha256, expected_blob_id)
    if stale is not None:
        raise stale


@contextlib.contextmanager
def judged_after_checks(stale: PreconditionFailed | None) -> Iterator[None]:
    """Run a write's other checks before its stale precondition is reported: a write they refuse is
    refused as before (the precondition named first) and kept nowhere."""
    try:
        yield
    except GitmemError:
        if stale is not None:
            raise stale from None
        raise


def lost_write(
    note: NoteRow,
    operation: LostOperation,
    path: str,
    data: bytes | None,
    expected_sha256: str | None,
    expected_blob_id: str | None,
    actor: Actor | None,
) -> LostWrite:
    """What a write that lost only its race to ``note`` asked for (kept as a conflict of the note)."""
    base_sha256 = expected_sha256 if expected_sha256 is not None and expected_sha256 != note.sha256 else None
    return LostWrite(
        memory_id=note.memory_id,
        operation=operation,
        path=path,
        data=data,
        content_sha256=sha256_of(data) if data is not None else None,
        base_sha256=base_sha256,
        base_blob=expected_blob_id if base_sha256 is None else None,
        winner_version=note.version_id,
        winner_sha256=note.sha256,
        winner_blob=note.blob_id,
        winner_path=note.path,
        actor=actor,
    )


def check_free(index: StoreIndex, path: str, *, moving: str | None) -> tuple[int, int]:
    """A note may not sit at, above or below another note's path, nor differ from one only in case.
    Returns the store's totals (notes, bytes), read with the rest."""
    placement = index.placement(path, moving=moving)
    clash, twin = placement.clash, placement.twin
    if clash is not None and clash.memory_id != moving:
        raise PathConflict(
            f"{path} collides with the memory at {clash.path}",
            conflicting_memory_id=clash.memory_id,
            conflicting_path=clash.path,
        )
    if twin is not None:
        raise PathConflict(
            f"{path} differs only in case from the memory at {twin.path}; on a"
            " case-insensitive file system they would be one file",
            conflicting_memory_id=twin.memory_id,
            conflicting_path=twin.path,
        )
    return placement.totals


def check_moved(index: StoreIndex, note: NoteRow, path: str) -> tuple[int, int]:
    """:func:`check_free` for ``note`` going to ``path``, if that is a new path; the store's totals."""
    return check_free(index, path, moving=note.memory_id) if path != note.path else index.totals()


@dataclass(frozen=True)
class WritePlanner:
    """A store's rules for planning writes: its limits, how content is stored, and its clock."""

    policy: StorePolicy
    codec: ContentCodec
    clock: Clock

    def create(self, view: BatchView, path: str, data: bytes, actor: Actor | None) -> Change:
        count, size = check_free(view.index, path, moving=None)
        self.policy.check_counts(count + 1, size + len(data))
        now = self.clock()
        record = VersionRecord(
            ids.new_id(ids.MEMORY),
            ids.new_id(ids.VERSION),
            "created",
            path,
            sha256_of(data),
            len(data),
            actor,
            now,
            now,
        )
        return Change(record, {paths.git_path(path): self.blob(view, path, data)}, path_checked_free=True)

    def update(
        self,
        view: BatchView,
        memory_id: str,
        path: str | None,
        data: bytes | None,
        expected_sha256: str | None,
        expected_blob_id: str | None,
        actor: Actor | None,
    ) -> Change | None:
        """A new version of ``memory_id`` with a new path and/or content; None if it is already so."""
        note = current(view.index, memory_id)
        new_path = path if path is not None else note.path
        new_sha = sha256_of(data) if data is not None else note.sha256
        if new_path == note.path and new_sha == note.sha256:
            return None  # already so (a retried update that landed): no new version
        stale = stale_precondition(note, expected_sha256, expected_blob_id)
        with judged_after_checks(stale):
            count, size = check_moved(view.index, note, new_path)
            body = data if data is not None else self.codec.decode(note.path, view.read_blob(note.blob_id))
            self.policy.check_counts(count, size - note.size + len(body))
        if stale is not None:
            operation: LostOperation = "modified" if data is not None else "moved"
            lost = lost_write(note, operation, new_path, data, expected_sha256, expected_blob_id, actor)
            raise StaleWrite(stale.message, lost)
        now = self.clock()
        record = VersionRecord(
            memory_id, ids.new_id(ids.VERSION), "modified", new_path, new_sha, len(body), actor, now, note.created_at
        )
        tree_changes: dict[str, str | None] = {paths.git_path(note.path): None}
        tree_changes[paths.git_path(new_path)] = self.blob(view, new_path, body)
        return Change(record, tree_changes, path_checked_free=new_path != note.path)

    def delete(
        self,
        view: BatchView,
        memory_id: str,
        expected_sha256: str | None,
        expected_blob_id: str | None,
        actor: Actor | None,
    ) -> Change:
        note = current(view.index, memory_id)
        stale = stale_precondition(note, expected_sha256, expected_blob_id)
        if stale is not None:
            lost = lost_write(note, "deleted", note.path, None, expected_sha256, expected_blob_id, actor)
            raise StaleWrite(stale.message, lost)
        now = self.clock()
        record = VersionRecord(
            memory_id, ids.new_id(ids.VERSION), "deleted", note.path, None, None, actor, now, note.created_at
        )
        return Change(record, {paths.git_path(note.path): None})

    def blob(self, view: BatchView, path: str, data: bytes) -> str:
        """``data`` as the blob of the note at ``path`` (encrypted in an encrypted store), staged in the batch."""
        return view.add_blob(self.codec.encode(path, data))
