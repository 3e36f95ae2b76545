"""Replaying a source's versions into a new or empty store, oldest first, each one commit.

Every version is committed through the store's own write path (:meth:`MemoryStore.commit_plans`, the
group commit), with the ids, operation, path, actor and times the source gave it: the commit's
trailers and author are the version's, exactly as if it had been written here then. A batch of
versions is one pack and one move of ``main``, so 50,000 versions are a hundred flushes, not 50,000.

Each version meets the rules of a write (the path rule, the size limit, the secret detector, the
store's counts, no note at, above or below another's path, no case twins). A refused version stops
the import after the versions before it: history cannot skip a step. Nothing half-made is left:
every batch lands whole or not at all, and the same import run again skips the versions the store
already holds (they must be the start of the source's, in order) and goes on from there, so an
import killed at any moment resumes and ends as one uninterrupted run would have.

A redacted version stays redacted: it is committed with its ``Redacted-At`` and ``Redacted-By`` and
no path or content, and changes no note, as the one replay rule (:mod:`gitmem.git.replay`) says.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Protocol

from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.group_commit import BatchView, Change, Landed, Plan
from gitmem.engine.store.store import MemoryStore
from gitmem.engine.store.write_plans import check_free, check_moved
from gitmem.engine.transfer.journal import Journal, crash_point
from gitmem.engine.transfer.values import ImportReport, Incoming, Refused, StoreFields
from gitmem.errors import GitmemError, InvalidRequest, NotFound
from gitmem.git.commits import VersionRecord
from gitmem.model import Actor
from gitmem.rules.paths import git_path

log = logging.getLogger(__name__)

BATCH_VERSIONS = 500  # versions a batch: one pack, one move of main, one index transaction
_ID = re.compile(r"[0-9A-Za-z]{1,64}")
_ACTOR_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.:@-]{0,127}")

# (what is happening, how many so far, of how many if known): "listing", then "importing"
Progress = Callable[[str, int, int | None], None]


def _no_progress(phase: str, done: int, total: int | None) -> None:
    pass


class Source(Protocol):
    """Where an import's versions come from."""

    @property
    def key(self) -> str:
        """What identifies the source across runs (the journal's key)."""
        ...

    def fields(self) -> StoreFields:
        """The name, description and metadata of the store the import makes."""
        ...

    def prepare(self, store: MemoryStore, spool: Journal, progress: Progress) -> int:
        """Get ready to replay into ``store`` (list, spool, read, sort out what its rules refuse) and say how
        many versions there are."""
        ...

    def versions(self) -> Iterable[Incoming]:
        """Every version, oldest first."""
        ...

    def refused(self) -> tuple[Refused, ...]:
        """What the source left out, and why (a folder's refused files)."""
        ...


class ImportStopped(InvalidRequest):
    """A version was refused; the versions before it are in the store, and the same import goes on."""


def run_import(
    gm: Gitmem,
    workspace_id: str,
    source: Source,
    *,
    into: str | None = None,
    name: str | None = None,
    progress: Progress = _no_progress,
    batch: int = BATCH_VERSIONS,
) -> ImportReport:
    """Import ``source`` into the store ``into`` (new or empty, or holding the start of this very
    import), else into a new store named ``name`` (default: the source's own), or, if an earlier run of
    the same import was cut short, into the store it began."""
    journal = Journal(gm.home, source.key)
    store, resumed = _target(gm, workspace_id, journal, source, into, name)
    total = source.prepare(store, journal, progress)
    imported, skipped = replay(store, source.versions(), total=total, progress=progress, batch=batch)
    journal.finish()
    return ImportReport(store.id, imported, skipped, resumed or skipped > 0, source.refused())


def _target(
    gm: Gitmem, workspace_id: str, journal: Journal, source: Source, into: str | None, name: str | None
) -> tuple[MemoryStore, bool]:
    if into is not None:
        info = gm.get_store(workspace_id, into)
        journal.begin(info.id)
        return gm.store(workspace_id, info.id, info=info), False
    begun = journal.store_id()
    if begun is not None:
        try:
            info = gm.get_store(workspace_id, begun)
            log.info("resuming the import of %s into %s", source.key, begun)
            return gm.store(workspace_id, info.id, info=info), True
        except NotFound:
            log.info("the store %s an earlier import began is gone; starting anew", begun)
    fields = source.fields()
    info = gm.create_store(
        workspace_id, name or fields.name, fields.description, fields.metadata, encrypted=fields.encrypted
    )
    journal.begin(info.id)
    return gm.store(workspace_id, info.id, info=info), False


def replay(
    store: MemoryStore,
    versions: Iterable[Incoming],
    *,
    total: int | None = None,
    progress: Progress = _no_progress,
    batch: int = BATCH_VERSIONS,
) -> tuple[int, int]:
    """Replay ``versions`` (oldest first) into ``store``, skipping those it already holds, which must be
    their start; (versions imported now, versions skipped)."""
    incoming = iter(versions)
    seen = _skip_present(store, incoming)
    skipped = len(seen)
    progress("importing", skipped, total)
    imported = 0
    pending: list[tuple[VersionRecord, bytes | None]] = []
    for position, version in enumerate(incoming, start=skipped + 1):
        try:
            pending.append(_checked(store, version, seen))
        except GitmemError as exc:
            imported += _commit(store, pending, skipped + imported)
            raise _stopped(store, position, version.record, exc, skipped + imported) from None
        if len(pending) >= batch:
            imported += _commit(store, pending, skipped + imported)
            progress("importing", skipped + imported, total)
            crash_point("importing", skipped + imported)
    imported += _commit(store, pending, skipped + imported)
    progress("importing", skipped + imported, total)
    return imported, skipped


def _skip_present(store: MemoryStore, incoming: Iterator[Incoming]) -> set[str]:
    """The ids of the versions the store holds, checked to be the start of ``incoming`` (consumed)."""
    store.index.catch_up()
    present = [version_id for version_id, _ in store.index.version_ids()]
    for position, version_id in enumerate(present, start=1):
        version = next(incoming, None)
        if version is None or version.record.version_id != version_id:
            raise InvalidRequest(
                f"memory store {store.id} is not empty and does not hold the start of this import (its version"
                f" {position} is {version_id}); import into a new or empty store"
            )
    return set(present)


def _checked(store: MemoryStore, version: Incoming, seen: set[str]) -> tuple[VersionRecord, bytes | None]:
    """The version's record and its content as bytes once they have passed every rule of a write that
    does not need the store's notes (those are checked in its plan); no bytes for a deletion or a
    redacted version."""
    record = version.record
    if not record.version_id.startswith("memver_") or not _ID.fullmatch(record.version_id[7:]):
        raise InvalidRequest(f"{record.version_id!r} is not a version id (memver_ and letters or digits)")
    if not record.memory_id.startswith("mem_") or not _ID.fullmatch(record.memory_id[4:]):
        raise InvalidRequest(f"{record.memory_id!r} is not a memory id (mem_ and letters or digits)")
    if record.version_id in seen:
        raise InvalidRequest(f"version {record.version_id} comes twice")
    if record.operation not in ("created", "modified", "deleted"):
        raise InvalidRequest(f"{record.operation!r} is not an operation (created, modified or deleted)")
    for actor in (record.created_by, record.redacted_by):
        _check_actor(actor)
    if record.created_at.tzinfo is None or record.note_created_at.tzinfo is None:
        raise InvalidRequest("a version's times must say their time zone")
    seen.add(record.version_id)
    if record.operation == "deleted" or record.redacted_at is not None:
        return record, None
    if record.path is None or version.content is None:
        raise InvalidRequest(f"version {record.version_id} is a {record.operation} version without path or content")
    store.policy.check_path(record.path)
    data = store.policy.check_content(record.path, version.content)
    digest = hashlib.sha256(data).hexdigest()
    if record.content_sha256 not in (None, digest) or record.content_size not in (None, len(data)):
        raise InvalidRequest(f"the content of version {record.version_id} does not match its content_sha256 or size")
    return replace(record, content_sha256=digest, content_size=len(data)), data


def _check_actor(actor: Actor | None) -> None:
    if actor is not None and not _ACTOR_ID.fullmatch(actor.id):
        raise InvalidRequest(f"{actor.id!r} is not an actor's id (letters, digits and _ . : @ -)")


def _stopped(store: MemoryStore, position: int, record: VersionRecord, exc: GitmemError, landed: int) -> ImportStopped:
    where = f" ({record.path})" if record.path else ""
    return ImportStopped(
        f"version {position}, {record.version_id}{where}, was refused: {exc.message} The {landed} versions before"
        f" it are in {store.id}; put the cause right and run the same import again to go on from there."
    )


def _commit(store: MemoryStore, pending: list[tuple[VersionRecord, bytes | None]], landed_before: int) -> int:
    """Commit ``pending`` as one batch (cleared); how many landed. A refused one stops the import."""
    if not pending:
        return 0
    chain = _Chain()
    plans = [chain.guard(_plan(store, record, data), first=i == 0) for i, (record, data) in enumerate(pending)]
    results = store.commit_plans(plans)
    landed = sum(1 for result in results if isinstance(result, Landed))
    for position, ((record, _data), result) in enumerate(zip(pending, results, strict=True)):
        if isinstance(result, BaseException) and not isinstance(result, _NotReached):
            if isinstance(result, GitmemError):
                raise _stopped(store, landed_before + position + 1, record, result, landed_before + landed)
            raise result
    pending.clear()
    return landed


class _NotReached(Exception):
    """A version after a refused one in the same batch: not tried."""


class _Chain:
    """Plans of one batch that stop at the first refused one (a batch is planned again from its first
    plan if ``main`` moved under it, so the first plan starts the chain anew)."""

    def __init__(self) -> None:
        self.broken = False

    def guard(self, plan: Plan, *, first: bool) -> Plan:
        def run(view: BatchView) -> Change | None:
            if first:
                self.broken = False
            if self.broken:
                raise _NotReached
            try:
                return plan(view)
            except BaseException:
                self.broken = True
                raise

        return run


def _plan(store: MemoryStore, record: VersionRecord, data: bytes | None) -> Plan:
    """The change one version makes, judged on the tip as the batch's earlier versions left it."""

    def plan(view: BatchView) -> Change:
        index = view.index
        note = index.note(record.memory_id)
        changes: dict[str, str | None] = {}
        if record.operation == "deleted":
            if note is not None:
                changes[git_path(note.path)] = None
            return Change(record, changes)
        if data is None or record.path is None:  # redacted: no path, no content, no note moves
            return Change(record, changes)
        path = record.path
        if note is None:
            count, size = check_free(index, path, moving=record.memory_id)
            store.policy.check_counts(count + 1, size + len(data))
        else:
            count, size = check_moved(index, note, path)
            store.policy.check_counts(count, size - note.size + len(data))
            changes[git_path(note.path)] = None
        changes[git_path(path)] = store.planner.blob(view, path, data)
        return Change(record, changes, path_checked_free=note is None or note.path != path)

    return plan


__all__ = ["BATCH_VERSIONS", "ImportStopped", "Progress", "Source", "replay", "run_import"]
