"""A memory store (porcelain): notes and versions over one bare repository.

Every change is one commit on ``main`` made under the store's writer lock and swapped in with a
compare-and-swap; the index follows. Writes that arrive together are committed together
(:mod:`gitmem.engine.store.group_commit`).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from gitmem.clock import Clock, from_micros, system_clock, to_micros
from gitmem.crypto.codec import ContentCodec, PlainCodec
from gitmem.durable import DURABLE, Durability
from gitmem.engine.index.search import SEARCH_BUDGET_SECONDS, SearchHit, search
from gitmem.engine.index.store_index import StoreIndex
from gitmem.engine.store.conflicts import Conflict, ConflictLog, LostWrite, StaleWrite
from gitmem.engine.store.diff import VersionDiff, diff_versions
from gitmem.engine.store.group_commit import BatchView, Change, Landed, Plan, committer_for
from gitmem.engine.store.reading import MAX_NOTES_PAGE, MAX_VERSIONS_PAGE, StoreReading, check_listing
from gitmem.engine.store.stale_merge import merge_on_write
from gitmem.engine.store.write_plans import WritePlanner
from gitmem.errors import PreconditionFailed
from gitmem.git import repository
from gitmem.git.pack import policy as packing_policy
from gitmem.git.signing import Signer
from gitmem.model import Actor, Note, Page, Version
from gitmem.rules.policy import MEMORY_STORE, StorePolicy

log = logging.getLogger(__name__)

PACK_EVERY_WRITES = 256  # at most, between background packs (gitmem.git.pack.policy decides sooner)
MERGE_ATTEMPTS = 3  # merges on write against a note that keeps moving, before the write is kept as a conflict


def _stored_time(when: dt.datetime) -> dt.datetime:
    """A time as the index gives it back (microseconds, UTC)."""
    return from_micros(to_micros(when))


class MemoryStore(StoreReading):
    # What every write's plan sees of the batch (see :meth:`fenced`); None: the batch itself.
    _fence: Callable[[BatchView], BatchView] | None = None

    def __init__(
        self,
        repo_path: Path,
        store_id: str,
        *,
        policy: StorePolicy = MEMORY_STORE,
        codec: ContentCodec | None = None,
        clock: Clock = system_clock,
        write_guard: Callable[[], None] | None = None,
        on_commit: Callable[[MemoryStore], object] | None = None,
        on_redact: Callable[[MemoryStore, Version], None] | None = None,
        on_conflict: Callable[[MemoryStore, Conflict], None] | None = None,
        database_url: str | None = None,
        durability: Durability = DURABLE,
        search_budget: float = SEARCH_BUDGET_SECONDS,
        signer: Signer | None = None,
    ) -> None:
        self.path = repo_path
        # The home's signing key: every commit the store writes (versions, conflicts, rewrites) is signed.
        # None only for a store opened without a home (a library object in tests and benchmarks).
        self.signer = signer
        self.durability = durability  # the home's GITMEM_FSYNC
        self.search_budget = search_budget  # the home's GITMEM_SEARCH_BUDGET: seconds a search may take
        self.id = store_id
        self.policy = policy
        self.codec: ContentCodec = codec or PlainCodec()
        self.clock = clock
        self.planner = WritePlanner(policy, self.codec, clock)
        self._committer = committer_for(repo_path, durability)  # held here: it lives as long as a handle
        self._write_guard = write_guard or (lambda: None)
        # Told right after a change lands (webhooks' outbox); a failure there never fails the write.
        self._on_commit = on_commit
        self._on_redact = on_redact
        # database_url: the index in PostgreSQL rather than in a SQLite file beside the repository.
        self.index = StoreIndex(
            repository.open_repository(repo_path, durability),
            database_url=database_url,
            store_id=store_id,
            owns_repo=True,
            durability=durability,  # libgit2's loose objects (review marks, ...) flushed as the home says
        )
        # The losing side of every write refused for a stale precondition (gitmem.engine.store.conflicts).
        self.conflicts = ConflictLog(
            store_id,
            repo_path,
            self.index,
            self.codec,
            clock,
            durability,
            on_kept=(lambda conflict: on_conflict(self, conflict)) if on_conflict is not None else None,
            signer=signer,
        )

    def close(self) -> None:
        self.index.close()

    def park(self) -> None:
        """No thread is using the store now: give back all but one connection and repository
        (:mod:`gitmem.engine.open_stores`)."""
        self.index.park()

    # -- writing ----------------------------------------------------------------------------------

    def create(self, path: str, content: str, actor: Actor | None = None) -> Note:
        self.policy.check_path(path)
        data = self.policy.check_content(path, content)

        landed = self.commit_plan(lambda view: self.planner.create(view, path, data, actor))
        assert landed is not None  # noqa: S101  narrows the type for mypy; never a check of input
        return self._landed_note(landed)

    def upsert(
        self, path: str, content: str, actor: Actor | None = None, expected_sha256: str | None = None
    ) -> tuple[Note, bool]:
        """Create the note at ``path``, or replace its content if there is one: decided inside the write,
        against the tip, so two writers never both create. With ``expected_sha256``, only if a note is
        there with that content. Returns the note and whether it was created."""
        self.policy.check_path(path)
        data = self.policy.check_content(path, content)
        decided: list[tuple[str, bool]] = []  # (memory id, created) as planned by the attempt that ran last

        def plan(view: BatchView) -> Change | None:
            existing = view.index.note_at(path)
            if existing is None:
                if expected_sha256 is not None:
                    raise PreconditionFailed(f"there is no memory at {path} with content_sha256 {expected_sha256}")
                change = self.planner.create(view, path, data, actor)
                decided.append((change.record.memory_id, True))
                return change
            decided.append((existing.memory_id, False))
            return self.planner.update(view, existing.memory_id, None, data, expected_sha256, None, actor)

        self.commit_plan(plan)
        memory_id, created = decided[-1]
        return self.get(memory_id, with_content=False), created

    def update(
        self,
        memory_id: str,
        content: str | None = None,
        path: str | None = None,
        *,
        expected_sha256: str | None = None,
        expected_blob_id: str | None = None,
        actor: Actor | None = None,
        merge: bool = False,
    ) -> Note:
        """``merge``: a stale precondition merges three ways with the winner where the changes do not
        overlap, instead of a refusal (a gitmem extension; :mod:`gitmem.engine.store.conflict_resolution`)."""
        if path is not None:
            self.policy.check_path(path)
        data = None
        if content is not None:
            current = self.index.note(memory_id)  # only to name the note in a refusal
            data = self.policy.check_content(path or (current.path if current else memory_id), content)

        def attempt(data: bytes | None, sha: str | None, blob: str | None, keep: bool = True) -> Landed | None:
            return self.commit_plan(
                lambda view: self.planner.update(view, memory_id, path, data, sha, blob, actor), keep_conflicts=keep
            )

        if merge:
            landed = self._merging_update(attempt, data, expected_sha256, expected_blob_id)
        else:
            landed = attempt(data, expected_sha256, expected_blob_id)
        if landed is None:
            return self.get(memory_id, with_content=False)
        return self._landed_note(landed)

    def _merging_update(
        self,
        attempt: Callable[[bytes | None, str | None, str | None, bool], Landed | None],
        data: bytes | None,
        expected_sha256: str | None,
        expected_blob_id: str | None,
    ) -> Landed | None:
        """An update that, if its precondition is stale, is merged with the winner and tried again on it;
        kept as a conflict (its own text, its own base) when there is no clean merge."""
        first: StaleWrite | None = None
        for _attempt in range(MERGE_ATTEMPTS):
            try:
                return attempt(data, expected_sha256, expected_blob_id, False)
            except StaleWrite as stale:
                first = first or stale
                lost = dataclasses.replace(
                    first.lost,
                    winner_version=stale.lost.winner_version,
                    winner_sha256=stale.lost.winner_sha256,
                    winner_blob=stale.lost.winner_blob,
                    winner_path=stale.lost.winner_path,
                )
                merged = self._merged(lost) if lost.data is not None else None
                if merged is None:
                    raise self._kept(StaleWrite(stale.message, lost)) from None
                data, expected_sha256, expected_blob_id = merged, lost.winner_sha256, None
        assert first is not None  # the note kept moving under the merges: keep the write as it came  # noqa: S101  narrows the type for mypy; never a check of input
        raise self._kept(first) from None

    def delete(
        self,
        memory_id: str,
        *,
        expected_sha256: str | None = None,
        expected_blob_id: str | None = None,
        actor: Actor | None = None,
    ) -> Version:
        landed = self.commit_plan(
            lambda view: self.planner.delete(view, memory_id, expected_sha256, expected_blob_id, actor),
            archived_ok=True,
        )
        assert landed is not None  # noqa: S101  narrows the type for mypy; never a check of input
        r = landed.change.record
        return Version(
            id=r.version_id,
            store_id=self.id,
            memory_id=r.memory_id,
            operation=r.operation,
            created_at=_stored_time(r.created_at),
            created_by=r.created_by,
            path=r.path,
            content_sha256=None,
            content_size_bytes=None,
            commit_id=landed.commit_id,
        )

    def _landed_note(self, landed: Landed) -> Note:
        """The answer to a write, from what was committed: the index may not have caught up."""
        r = landed.change.record
        blob_id = landed.change.blob_id
        assert r.path is not None and r.content_sha256 is not None and r.content_size is not None and blob_id  # noqa: S101  narrows the type for mypy; never a check of input
        return Note(
            id=r.memory_id,
            store_id=self.id,
            path=r.path,
            content_sha256=r.content_sha256,
            content_size_bytes=r.content_size,
            blob_id=blob_id,
            version_id=r.version_id,
            created_at=_stored_time(r.note_created_at),
            updated_at=_stored_time(r.created_at),
        )

    def search(
        self, query: str, path_prefix: str | None = None, limit: int = 20, page: str | None = None
    ) -> Page[SearchHit]:
        return search(self, query, path_prefix, limit, page)

    def diff(self, version_id: str, against: str | None = None) -> VersionDiff:
        """What ``version_id`` changed against ``against`` (default: its note's version before it)."""
        return diff_versions(self, version_id, against)

    def previous_version(self, version: Version) -> Version | None:
        """The same note's version just before ``version`` (a note of 1,000 versions once made each diff
        read 1,000 rows; :meth:`StoreIndex.version_before` looks up one)."""
        before = self.index.version_before(version.id)
        return self.version(before) if before else None

    def commit_plan(self, plan: Plan, *, archived_ok: bool = False, keep_conflicts: bool = True) -> Landed | None:
        """Commit ``plan``'s change in the store's next batch (see :mod:`gitmem.engine.store.group_commit`); a
        write refused only for its stale precondition is kept as a conflict, then refused."""
        if not archived_ok:
            self._write_guard()
        fence = self._fence
        if fence is not None:
            plan = _behind(plan, fence)
        try:
            landed = self._committer.submit(self.index, plan, self._after_write, self.signer)
        except StaleWrite as stale:
            if not keep_conflicts:
                raise
            raise self._kept(stale) from None
        if landed is not None:
            self._tell(self._on_commit, self)
        return landed

    def commit_plans(self, plans: Sequence[Plan]) -> Sequence[Landed | BaseException | None]:
        """Commit ``plans`` in order in one batch, one commit each, one pack and one move of ``main`` for
        them all: a bulk import (:mod:`gitmem.engine.transfer`). Each comes to its commit, None, or the
        error that refused it alone; none is kept as a conflict."""
        self._write_guard()
        fence = self._fence
        if fence is not None:
            plans = [_behind(plan, fence) for plan in plans]
        results = self._committer.submit_all(self.index, list(plans), self._after_write, self.signer)
        if any(isinstance(result, Landed) for result in results):
            self._tell(self._on_commit, self)
        return results

    def fenced(self, fence: Callable[[BatchView], BatchView]) -> MemoryStore:
        """This store, its writes planned on ``fence(view)`` rather than on the batch's own view: how a
        reader who sees less than the store (a task's approved view) writes, so that what it cannot read
        does not exist for its writes either, judged inside the batch as every check of a write is."""
        fenced = copy.copy(self)  # the same repository, index and committer; only the fence differs
        fenced._fence = fence
        return fenced

    def landed_note(self, landed: Landed | None, memory_id: str) -> Note:
        """The answer to a write of ``memory_id`` that landed (or changed nothing: then the note as read)."""
        return self._landed_note(landed) if landed is not None else self.get(memory_id, with_content=False)

    def _kept(self, stale: StaleWrite) -> PreconditionFailed:
        """Keep the losing side of ``stale`` (durably, before anyone is answered); the refusal to raise."""
        conflict = self.conflicts.keep(stale.lost)
        self._after_write()  # the conflict's pack counts toward the next roll-up as a write's does
        return PreconditionFailed(stale.message, conflict_id=conflict.id)

    def _merged(self, lost: LostWrite) -> bytes | None:
        """The clean merge of a stale update with what it lost to (None: none)."""
        return merge_on_write(self.index, self.codec, self.policy, lost)

    def _after_write(self) -> None:
        """After each batch that wrote a pack (run by its leader)."""
        packing_policy.after_write(
            self.path, max_writes=PACK_EVERY_WRITES, when_quiet=self.index.checkpoint, fsync=self.durability.flushes
        )

    def announce_redaction(self, version: Version) -> None:
        """Tell the store's listener (the webhooks' outbox) that ``version`` was redacted
        (:func:`gitmem.engine.rewrite.redaction.redact` calls it once the rewrite has landed)."""
        self._tell(self._on_redact, self, version)

    @staticmethod
    def _tell(listener: Callable[..., object] | None, *args: object) -> None:
        if listener is None:
            return
        try:
            listener(*args)
        except Exception:  # the change has landed; the outbox's catch-up scan reports it later
            log.exception("a change listener failed; the change itself was made")


def _behind(plan: Plan, fence: Callable[[BatchView], BatchView]) -> Plan:
    return lambda view: plan(fence(view))


__all__ = ["MAX_NOTES_PAGE", "MAX_VERSIONS_PAGE", "MemoryStore", "check_listing"]
