"""Seeing a conflict against the winner, resolving it, and the opt-in merge of a stale write.

**Compare.** A conflict is shown with the version it lost to (a diff, winner to loser) and, when the
base it was computed from is still in the history and the note still exists, a three-way merge of the
base, the losing text and the note as it is now (:func:`gitmem.rules.merge.merge3`): clean when the two
changes do not overlap, else with Git-style markers for a person to edit.

**Resolve.** Taking the winner writes nothing (its text is the note's already); taking the loser writes
the losing text (or the delete) and taking a merge writes the text given (or the clean merge), each as
an ordinary new version with a precondition: by default that the note still holds the winner's text, so
a resolution made against a note that moved on again is refused (and kept as a conflict of its own).
Then the conflict is marked resolved. A retried resolution writes no second version.

The merge on write that a request may ask for is :mod:`gitmem.engine.store.stale_merge`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gitmem.engine.store.conflicts import Conflict
from gitmem.engine.store.diff import Hunk, hunks
from gitmem.engine.store.stale_merge import MERGE_LABELS, base_text
from gitmem.errors import InvalidRequest, NotFound
from gitmem.git.conflict_records import RESOLUTIONS, Resolution
from gitmem.model import Actor, Note, Version
from gitmem.rules.merge import MergeResult, merge3

if TYPE_CHECKING:
    from gitmem.engine.store.store import MemoryStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConflictComparison:
    conflict: Conflict  # with its text
    winner: Version | None  # the version it lost to, with its text (None once retention dropped it)
    note: Note | None  # the note now, with its text (None if it was deleted since)
    base: str | None  # the text the losing write was computed from, if still in the history
    hunks: tuple[Hunk, ...]  # winner -> loser
    merge: MergeResult | None  # base, loser and the note now; None where there is nothing to merge

    @property
    def winner_text(self) -> str:
        if self.winner is None or self.winner.operation == "deleted":
            return ""
        return self.winner.content or ""


@dataclass(frozen=True)
class Resolved:
    conflict: Conflict
    version_id: str | None  # the version the resolution wrote (None: it took the winner)


def _winner(store: MemoryStore, conflict: Conflict) -> Version | None:
    try:
        return store.version(conflict.winner_version_id, with_content=True)
    except NotFound:
        return None


def _note(store: MemoryStore, memory_id: str) -> Note | None:
    try:
        return store.get(memory_id, with_content=True)
    except NotFound:
        return None


def compare(store: MemoryStore, conflict_id: str) -> ConflictComparison:
    conflict = store.conflicts.get(conflict_id, with_content=True)
    winner, note = _winner(store, conflict), _note(store, conflict.memory_id)
    base = None
    merged = None
    if conflict.redacted_at is None:
        base = base_text(store.index, store.codec, conflict.memory_id, conflict.base_sha256, conflict.base_blob_id)
        if base is not None and note is not None and conflict.operation == "modified":
            merged = merge3(base, conflict.content or "", note.content or "", labels=MERGE_LABELS)
    winner_text = "" if winner is None or winner.operation == "deleted" else winner.content or ""
    loser_text = conflict.content or ""
    shown = conflict.redacted_at is None and conflict.operation != "moved"  # a move changes no text
    changes = hunks(winner_text, loser_text) if shown else ()
    return ConflictComparison(conflict, winner, note, base, changes, merged)


def resolve(
    store: MemoryStore,
    conflict_id: str,
    take: Resolution,
    *,
    content: str | None = None,
    expected_sha256: str | None = None,
    actor: Actor | None = None,
) -> Resolved:
    """Take the winner, the loser or a merged text (``content``, or the clean merge), then mark it."""
    if take not in RESOLUTIONS:
        raise InvalidRequest("take must be winner, loser or merged")
    if content is not None and take != "merged":
        raise InvalidRequest("content goes with take=merged only")
    conflict = store.conflicts.get(conflict_id, with_content=True)
    if conflict.resolution is not None:
        if conflict.resolution == take:
            return Resolved(conflict, conflict.resolved_version_id)  # a retry of a resolution that landed
        raise InvalidRequest(f"conflict {conflict_id} was resolved already (took the {conflict.resolution})")
    if conflict.redacted_at is not None and take != "winner":
        raise InvalidRequest(f"conflict {conflict_id} is redacted: only the winner can be taken")
    precondition = expected_sha256 if expected_sha256 is not None else conflict.winner_sha256
    version_id = None
    if take == "loser" and conflict.operation == "deleted":
        version_id = store.delete(conflict.memory_id, expected_sha256=precondition, actor=actor).id
    elif take == "loser":
        text = conflict.content if conflict.operation == "modified" else None  # a move takes its path only
        note = store.update(
            conflict.memory_id, content=text, path=conflict.path, expected_sha256=precondition, actor=actor
        )
        version_id = note.version_id
    elif take == "merged":
        text = _merged_text(store, conflict_id, content)
        note = store.update(conflict.memory_id, content=text, expected_sha256=precondition, actor=actor)
        version_id = note.version_id
    marked = store.conflicts.mark_resolved(conflict, take, version_id, actor)
    return Resolved(marked, version_id)


def _merged_text(store: MemoryStore, conflict_id: str, content: str | None) -> str:
    if content is not None:
        return content
    merged = compare(store, conflict_id).merge
    if merged is None:
        raise InvalidRequest(
            "there is no merge to take (the base left the history, or the note was deleted): send content"
        )
    if not merged.clean:
        raise InvalidRequest(f"the texts overlap in {merged.conflicts} places: send the merged text as content")
    return merged.text


__all__ = ["ConflictComparison", "Resolved", "compare", "resolve"]
