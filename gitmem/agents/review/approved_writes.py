"""What a task under ``read_approved_only`` writes through: the store as its approved view shows it.

A task reads the store at its review mark (:mod:`.approved_view`); its writes land on the store
itself, on top of versions it cannot read. So that they tell it nothing of those versions, and change
none of them, every write's plan runs on a fenced index (:meth:`MemoryStore.fenced`), judged inside
the batch as every other check of a write:

- a note the view does not hold does not exist: not found, as a read says (the task's own writes too,
  until a reviewer approves them);
- a note the view holds but whose newest version is pending (changed, moved or deleted since the
  mark) cannot be changed until it is reviewed: 409, with neither its content's sha256 nor its path;
- a path held by a note the view does not show (or shows elsewhere) is taken: 409, naming no note;
- a version after the mark does not exist for a restore.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

from gitmem.engine.index.queries import Placement, VersionRow
from gitmem.engine.index.store_index import NoteRow, StoreIndex
from gitmem.engine.store.group_commit import BatchView
from gitmem.errors import Conflict, NotFound


class ApprovedNotes(Protocol):
    """The notes a view holds (:class:`.approved_view.ApprovedNotes`), and the last version it shows."""

    upto_seq: int

    def note(self, memory_id: str) -> NoteRow | None: ...

    def note_at(self, path: str) -> NoteRow | None: ...


def pending(memory_id: str) -> Conflict:
    return Conflict(
        f"memory {memory_id} has changes waiting for review: it can be changed once a reviewer approved or"
        " reverted them"
    )


def path_taken(path: str) -> Conflict:
    return Conflict(f"{path} is taken by a change waiting for review")


class FencedIndex:
    """A batch's index, answering the plans' lookups as the approved view sees the store (the
    rest is the index's own)."""

    def __init__(self, index: StoreIndex, notes: ApprovedNotes) -> None:
        self._index = index
        self._notes = notes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    def _seen(self, row: NoteRow) -> bool:
        """Whether the view holds ``row`` as it is now (approved, and not changed since)."""
        approved = self._notes.note(row.memory_id)
        return approved is not None and approved.version_id == row.version_id

    def note(self, memory_id: str) -> NoteRow | None:
        approved = self._notes.note(memory_id)
        row = self._index.note(memory_id)
        if approved is None:
            if row is not None:  # pending, never approved: as absent as for a read
                raise NotFound(f"memory {memory_id} not found")
            return None  # deleted in the view and in the store: a restore may bring it back
        if row is None or row.version_id != approved.version_id:
            raise pending(memory_id)
        return row

    def note_at(self, path: str) -> NoteRow | None:
        row = self._index.note_at(path)
        approved = self._notes.note_at(path)
        if row is None and approved is None:
            return None
        if row is None or not self._seen(row):
            raise path_taken(path)
        return row

    def placement(self, path: str, *, moving: str | None) -> Placement:
        found = self._index.placement(path, moving=moving)
        for other in (found.clash, found.twin):
            if other is not None and other.memory_id != moving and not self._seen(other):
                raise path_taken(path)
        return found

    def version(self, version_id: str) -> VersionRow | None:
        row = self._index.version(version_id)
        return row if row is not None and row.seq <= self._notes.upto_seq else None


class FencedBatch(BatchView):
    """A batch's view whose index is fenced; blobs are the batch's own."""

    def __init__(self, view: BatchView, notes: ApprovedNotes) -> None:  # no BatchView state
        self._view = view
        self.index = cast(StoreIndex, FencedIndex(view.index, notes))
        self.staged = view.staged

    def add_blob(self, data: bytes) -> str:
        return self._view.add_blob(data)

    def read_blob(self, blob_id: str) -> bytes:
        return self._view.read_blob(blob_id)


def may_change(index: StoreIndex, notes: ApprovedNotes, memory_id: str) -> None:
    """The fence's answer for ``memory_id`` before a write starts, so that a refusal of its content
    (which names the note's path) cannot name a path the view does not show."""
    if FencedIndex(index, notes).note(memory_id) is None:
        raise NotFound(f"memory {memory_id} not found")
