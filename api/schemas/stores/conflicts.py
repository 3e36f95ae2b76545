"""The wire of :mod:`gitmem.api.routers.stores.conflicts` (a gitmem extension: the SDK has none): a kept conflict,
its comparison with the winner, and a resolution."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gitmem.api.schemas.common import InModel, NoteContent, OutModel, Timestamp, View, WireActor, actor_out
from gitmem.api.schemas.stores.memories import Memory, Precondition
from gitmem.api.schemas.stores.memory_versions import MemoryVersion
from gitmem.api.schemas.stores.search import HunkOut
from gitmem.engine.store.conflict_resolution import ConflictComparison, Resolved
from gitmem.engine.store.conflicts import Conflict
from gitmem.engine.store.diff import NO_NEWLINE
from gitmem.model import Note

ConflictState = Literal["open", "resolved"]
Take = Literal["winner", "loser", "merged"]


class MemoryConflict(OutModel):
    id: str
    type: Literal["memory_conflict"] = "memory_conflict"
    memory_store_id: str
    memory_id: str
    operation: Literal["modified", "moved", "deleted"] = Field(description="What the losing write tried")
    path: str | None = Field(description="The path it asked for (null once redacted)")
    content: str | None = Field(None, description="The losing text (view=full; null for a delete or a move)")
    content_sha256: str | None
    content_size_bytes: int | None
    base_sha256: str | None = Field(description="The precondition it was refused on")
    base_blob_id: str | None = Field(description="Or the blob its If-Match named")
    winner_version_id: str = Field(description="The note's version when it was refused")
    winner_sha256: str | None
    created_by: WireActor | None
    created_at: Timestamp
    state: ConflictState
    resolution: Take | None
    resolved_version_id: str | None
    resolved_by: WireActor | None
    resolved_at: Timestamp | None
    redacted_at: Timestamp | None
    redacted_by: WireActor | None

    @classmethod
    def of(cls, conflict: Conflict, view: View) -> MemoryConflict:
        return cls(
            id=conflict.id,
            memory_store_id=conflict.store_id,
            memory_id=conflict.memory_id,
            operation=conflict.operation,
            path=conflict.path,
            content=conflict.content if view == "full" else None,
            content_sha256=conflict.content_sha256,
            content_size_bytes=conflict.content_size_bytes,
            base_sha256=conflict.base_sha256,
            base_blob_id=conflict.base_blob_id,
            winner_version_id=conflict.winner_version_id,
            winner_sha256=conflict.winner_sha256,
            created_by=actor_out(conflict.created_by),
            created_at=conflict.created_at,
            state=conflict.state,
            resolution=conflict.resolution,
            resolved_version_id=conflict.resolved_version_id,
            resolved_by=actor_out(conflict.resolved_by),
            resolved_at=conflict.resolved_at,
            redacted_at=conflict.redacted_at,
            redacted_by=actor_out(conflict.redacted_by),
        )


class MemoryConflictList(OutModel):
    data: list[MemoryConflict]
    next_page: str | None = None


class ConflictMerge(OutModel):
    text: str = Field(description="The merge; with overlapping changes, Git-style markers mark them")
    clean: bool
    conflicts: int = Field(description="Overlapping changes")


class MemoryConflictComparison(OutModel):
    type: Literal["memory_conflict_comparison"] = "memory_conflict_comparison"
    conflict: MemoryConflict = Field(description="With its text")
    winner: MemoryVersion | None = Field(description="The version it lost to, with its text (null: dropped since)")
    memory: Memory | None = Field(description="The note now, with its text (null: deleted since)")
    base: str | None = Field(description="The text the losing write was computed from, if still in the history")
    diff: str = Field(description="A unified diff from the winner to the losing text")
    hunks: list[HunkOut]
    merge: ConflictMerge | None = Field(description="Base, losing text and the note now; null: nothing to merge")

    @classmethod
    def of(cls, seen: ConflictComparison) -> MemoryConflictComparison:
        c = seen.conflict
        merge = seen.merge
        return cls(
            conflict=MemoryConflict.of(c, "full"),
            winner=MemoryVersion.of(seen.winner, "full") if seen.winner is not None else None,
            memory=Memory.of(seen.note, "full") if seen.note is not None else None,
            base=seen.base,
            diff=comparison_diff(seen),
            hunks=[HunkOut.of(h) for h in seen.hunks],
            merge=ConflictMerge(text=merge.text, clean=merge.clean, conflicts=merge.conflicts) if merge else None,
        )


def comparison_diff(seen: ConflictComparison) -> str:
    """The diff from the winner to the losing text, as ``git diff`` prints it."""
    name = seen.conflict.path or (seen.winner.path if seen.winner else None) or "(redacted)"
    lines = [f"--- a{name} (winner)", f"+++ b{name} (conflict)"] if seen.hunks else []
    for hunk in seen.hunks:
        lines.append(hunk.header)
        for line in hunk.lines:
            lines.append({"context": " ", "removed": "-", "added": "+"}[line.kind] + line.text)
            if not line.newline:
                lines.append(NO_NEWLINE)
    return "".join(line + "\n" for line in lines)


class ConflictResolve(InModel):
    take: Take = Field(description="winner: keep the note as it is; loser: write the losing text; merged: a merge")
    content: NoteContent | None = Field(None, description="With take=merged: the text (default: the clean merge)")
    precondition: Precondition | None = Field(
        None, description="What the note must hold for the resolution to be written (default: the winner's text)"
    )


class MemoryConflictResolution(OutModel):
    type: Literal["memory_conflict_resolution"] = "memory_conflict_resolution"
    conflict: MemoryConflict
    memory_version_id: str | None = Field(description="The version the resolution wrote (null: it took the winner)")
    memory: Memory | None = Field(description="The note after it (null: deleted)")

    @classmethod
    def of(cls, resolved: Resolved, note: Note | None) -> MemoryConflictResolution:
        return cls(
            conflict=MemoryConflict.of(resolved.conflict, "basic"),
            memory_version_id=resolved.version_id,
            memory=Memory.of(note, "basic") if note is not None else None,
        )
