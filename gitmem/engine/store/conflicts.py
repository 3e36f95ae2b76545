"""Conflicts: the losing side of every write refused for a stale precondition, kept in the store's repository.

A write whose precondition (``expected_content_sha256``, ``If-Match``, the memory tool's own) no longer
holds is refused with 409, as the SDK expects, and its text is kept as a **conflict** of that note: who
sent it, when, the content and its sha256, the base it was computed from (the precondition) and the
version it lost to. The record format is :mod:`gitmem.git.conflict_records`: one commit per conflict on
``refs/conflicts/<memory id>``, off ``main``, so ``main``, the listings, the versions and the index are
exactly what they would be without it, and a clone fetches the conflicts with
``git fetch origin 'refs/conflicts/*:refs/conflicts/*'`` (pushes to them are refused: only ``main`` is
pushable).

When one is kept:

- only once the write passed every other check, against the same tip as its precondition (the plans of
  :mod:`gitmem.engine.store.write_plans` run the path, size and count checks before they say "stale"): a
  refused secret, an oversized note, a path collision or a limit is refused as before and stored
  nowhere. The planner raises :class:`StaleWrite` with the :class:`LostWrite`; the store keeps it once
  the batch is over and answers 409 with the conflict's id (``conflict_id`` in the error's details);
- identical retries (same writer, path, text and base) are kept once: the retry gets the first one's id;
- the record is durable before the 409 is answered: written as one pack and a compare-and-swap of the
  note's ref, flushed like a batch of writes, under the store's writer lock (so a history rewrite's purge
  never runs between writing its objects and moving its ref).

What can be done with one: read it (the API, the web view beside the note's history, MCP, the CLI), see
it against the winner (a diff, and a three-way merge from the base when the base is still in the history,
:mod:`gitmem.engine.store.conflict_resolution`), and resolve it by taking the winner, the loser or a merged text:
the text is written as an ordinary new version with a precondition, then a resolution record marks the
conflict resolved. A resolved conflict stays until retention drops it, as versions do: conflicts older
than the workspace's retention go (resolved or not), redaction blanks one and purges its text from the
objects (:mod:`gitmem.engine.rewrite.conflicts`), and key rotation re-encrypts them with the notes.

Who sees them: whoever may read the note (the one access rule); a task reading a store under
``read_approved_only`` sees none (their text is what no reviewer has seen). A kept conflict is announced
to the store's listener (webhooks: ``memory.conflict``).

Reading is from Git alone: a listing walks the conflict refs (one line of commits per note with
conflicts, bounded by retention); nothing is indexed, so nothing can disagree with the refs.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2

from gitmem import ids
from gitmem.clock import Clock, to_micros
from gitmem.crypto.codec import ContentCodec
from gitmem.durable import DURABLE, Durability
from gitmem.engine.store.conflict_line import (
    EMPTY_TREE_OBJECT,
    Conflict,
    Entry,
    State,
    conflict_commit,
    conflict_of,
    conflicts_of_line,
    content_tree,
    is_retry,
    noted_ids,
    position,
    read_line,
)
from gitmem.errors import InvalidRequest, NotFound, PreconditionFailed, StoreBusy
from gitmem.git import repository
from gitmem.git.conflict_records import (
    CONFLICT,
    ConflictRecord,
    LostOperation,
    Resolution,
    ResolutionRecord,
    conflict_ref,
)
from gitmem.git.ref_pack import swap_with_objects
from gitmem.git.signing import Signer
from gitmem.git.trees import EMPTY_TREE_ID
from gitmem.model import Actor, Page
from gitmem.rules.paths import git_path

if TYPE_CHECKING:
    from gitmem.engine.index.store_index import StoreIndex

log = logging.getLogger(__name__)

MAX_CONFLICTS_PAGE = 100
MAX_FULL_CONFLICTS_PAGE = 20
_CAS_ATTEMPTS = 20


@dataclass(frozen=True)
class LostWrite:
    """A write refused only for its stale precondition, as its plan saw it (``data``: the text it sent)."""

    memory_id: str
    operation: LostOperation
    path: str  # the path it asked for
    data: bytes | None  # None for a delete or a move
    content_sha256: str | None
    base_sha256: str | None
    base_blob: str | None
    winner_version: str
    winner_sha256: str
    winner_blob: str  # what the note held when the write lost (for a merge on write)
    winner_path: str
    actor: Actor | None


class StaleWrite(PreconditionFailed):
    """A precondition failed and nothing else would have: the write is kept as a conflict (the engine
    catches this; callers see :class:`PreconditionFailed` with ``conflict_id``)."""

    def __init__(self, message: str, lost: LostWrite) -> None:
        super().__init__(message)
        self.lost = lost


class ConflictLog:
    """The conflicts of one store: kept, listed, read and marked resolved (see the module's docstring)."""

    def __init__(
        self,
        store_id: str,
        repo_path: Path,
        index: StoreIndex,
        codec: ContentCodec,
        clock: Clock,
        durability: Durability = DURABLE,
        on_kept: Callable[[Conflict], None] | None = None,
        signer: Signer | None = None,
    ) -> None:
        self.durability = durability
        self.signer = signer
        self.store_id = store_id
        self.repo_path = repo_path
        self.index = index
        self.codec = codec
        self.clock = clock
        self._on_kept = on_kept

    @property
    def repo(self) -> pygit2.Repository:
        return self.index.repo  # this thread's repository

    @contextlib.contextmanager
    def writer_lock(self) -> Iterator[None]:
        """The store's writer lock (SQLite: the flock; PostgreSQL: the advisory lock), as a batch holds it."""
        with self.index.batch_lock(), self.index.cluster_writer_lock():
            yield

    # -- keeping --------------------------------------------------------------------------------------

    def keep(self, lost: LostWrite) -> Conflict:
        """Keep ``lost`` as a conflict of its note (once: a retry gets the first one); the conflict."""
        now = self.clock()
        record = ConflictRecord(
            conflict_id=ids.new_id(CONFLICT),
            memory_id=lost.memory_id,
            operation=lost.operation,
            path=lost.path,
            content_sha256=lost.content_sha256,
            content_size=len(lost.data) if lost.data is not None else None,
            base_sha256=lost.base_sha256,
            base_blob=lost.base_blob,
            winner_version=lost.winner_version,
            winner_sha256=lost.winner_sha256,
            created_by=lost.actor,
            created_at=now,
        )
        if lost.data is not None:
            tree, objects = content_tree(lost.path, self.codec.encode(lost.path, lost.data))
        else:
            tree, objects = EMPTY_TREE_ID, [EMPTY_TREE_OBJECT]
        with self.writer_lock():
            for _ in range(_CAS_ATTEMPTS):
                line = read_line(self.repo, lost.memory_id)
                same = next((c for c in conflicts_of_line(self.store_id, line) if is_retry(c, record)), None)
                if same is not None:
                    return same
                tip = pygit2.Oid(hex=line[-1].commit_id) if line else None
                commit = conflict_commit(record, tree, tip.raw if tip is not None else None, self.signer)
                oid = pygit2.Oid(raw=commit.oid)
                if swap_with_objects(
                    self.repo, conflict_ref(lost.memory_id), tip, oid, [*objects, commit], self.durability
                ):
                    break
            else:
                raise StoreBusy(f"the conflicts of memory {lost.memory_id} kept changing; the conflict was not kept")
        kept = conflict_of(self.store_id, record, str(oid))
        log.info("kept conflict %s of memory %s in store %s", kept.id, kept.memory_id, self.store_id)
        if self._on_kept is not None:
            try:
                self._on_kept(kept)
            except Exception:  # kept already; the listener's failure must not turn the answer into another
                log.exception("a conflict listener failed; the conflict itself was kept")
        return kept

    # -- reading --------------------------------------------------------------------------------------

    def of_note(self, memory_id: str) -> list[Conflict]:
        """``memory_id``'s conflicts, newest first."""
        return sorted(conflicts_of_line(self.store_id, read_line(self.repo, memory_id)), key=position, reverse=True)

    def all(self) -> list[Conflict]:
        out: list[Conflict] = []
        for memory_id in noted_ids(self.repo):
            out += conflicts_of_line(self.store_id, read_line(self.repo, memory_id))
        return sorted(out, key=position, reverse=True)

    def list(
        self,
        *,
        memory_id: str | None = None,
        state: State | None = None,
        limit: int = 20,
        page: str | None = None,
        with_content: bool = False,
    ) -> Page[Conflict]:
        """Conflicts newest first, of one note or of the store, open or resolved or both."""
        if state not in (None, "open", "resolved"):
            raise InvalidRequest("state must be open or resolved")
        cap = MAX_FULL_CONFLICTS_PAGE if with_content else MAX_CONFLICTS_PAGE
        if not isinstance(limit, int) or not 1 <= limit <= cap:
            raise InvalidRequest(f"limit must be between 1 and {cap}" + (" with view=full" if with_content else ""))
        items = self.of_note(memory_id) if memory_id is not None else self.all()
        if state is not None:
            items = [c for c in items if c.state == state]
        if page is not None:
            micros, after = self.index.tokens.decode(page, "conflicts", int, str)
            items = [c for c in items if position(c) < (micros, after)]
        more = len(items) > limit
        items = items[:limit]
        if with_content:
            items = [self.with_content(c) for c in items]
        token = None
        if more:
            last = items[-1]
            token = self.index.tokens.encode("conflicts", to_micros(last.created_at), last.id)
        return Page(items, token)

    def get(self, conflict_id: str, *, with_content: bool = True) -> Conflict:
        if not ids.has_prefix(conflict_id, CONFLICT):
            raise NotFound(f"conflict {conflict_id} not found")
        found = next((c for c in self.all() if c.id == conflict_id), None)
        if found is None:
            raise NotFound(f"conflict {conflict_id} not found")
        return self.with_content(found) if with_content else found

    def text(self, conflict: Conflict) -> str | None:
        """The losing text (None for a delete, a move or a redacted conflict)."""
        if conflict.path is None or conflict.operation != "modified" or conflict.redacted_at is not None:
            return None
        tree = repository.tree_at(self.repo, repository.commit_at(self.repo, conflict.record_id).tree_id)
        entry = tree[git_path(conflict.path)]
        blob = repository.blob_at(self.repo, entry.id).data
        return self.codec.decode(conflict.path, blob).decode("utf-8")

    def with_content(self, conflict: Conflict) -> Conflict:
        return replace(conflict, content=self.text(conflict))

    # -- resolving ------------------------------------------------------------------------------------

    def mark_resolved(
        self, conflict: Conflict, resolution: Resolution, version_id: str | None, actor: Actor | None
    ) -> Conflict:
        """Append the resolution record (once: a conflict resolved already stays as it was)."""
        with self.writer_lock():
            for _ in range(_CAS_ATTEMPTS):
                line = read_line(self.repo, conflict.memory_id)
                current = next((c for c in conflicts_of_line(self.store_id, line) if c.id == conflict.id), None)
                if current is None:
                    raise NotFound(f"conflict {conflict.id} not found")
                if current.resolution is not None:
                    return current
                record = ResolutionRecord(conflict.id, resolution, version_id, actor, self.clock())
                tip = pygit2.Oid(hex=line[-1].commit_id)
                commit = conflict_commit(record, EMPTY_TREE_ID, tip.raw, self.signer)
                oid = pygit2.Oid(raw=commit.oid)
                if swap_with_objects(
                    self.repo, conflict_ref(conflict.memory_id), tip, oid, [EMPTY_TREE_OBJECT, commit], self.durability
                ):
                    return replace(
                        current,
                        resolution=resolution,
                        resolved_version_id=version_id,
                        resolved_by=actor,
                        resolved_at=record.resolved_at,
                    )
        raise StoreBusy(f"the conflicts of memory {conflict.memory_id} kept changing; the conflict was not marked")


class HiddenConflicts(ConflictLog):
    """A store's conflicts as a reader who may see none of them sees them (a task under
    ``read_approved_only``): nothing listed, nothing found, nothing to resolve; its writes are kept."""

    def of_note(self, memory_id: str) -> list[Conflict]:  # noqa: ARG002  ConflictLog's signature, which it overrides
        return []

    def all(self) -> list[Conflict]:
        return []

    def mark_resolved(
        self,
        conflict: Conflict,
        resolution: Resolution,  # noqa: ARG002  ConflictLog's signature, which it overrides
        version_id: str | None,  # noqa: ARG002  (the same)
        actor: Actor | None,  # noqa: ARG002  (the same)
    ) -> Conflict:
        raise NotFound(f"conflict {conflict.id} not found")


def hidden(log: ConflictLog) -> HiddenConflicts:
    return HiddenConflicts(log.store_id, log.repo_path, log.index, log.codec, log.clock, log.durability, log._on_kept)


# Read by the history rewriter (gitmem.engine.rewrite.conflicts) and the API from here, as before the split.
__all__ = [
    "EMPTY_TREE_OBJECT",
    "MAX_CONFLICTS_PAGE",
    "MAX_FULL_CONFLICTS_PAGE",
    "Conflict",
    "ConflictLog",
    "Entry",
    "HiddenConflicts",
    "LostWrite",
    "StaleWrite",
    "State",
    "conflict_commit",
    "content_tree",
    "hidden",
    "noted_ids",
    "read_line",
]
