"""Group commit: the writes that reach a store while a batch is being committed go together in the next.

Within a process, one store has one :class:`GroupCommitter`. A writer queues its plan; if no batch is
being made it becomes the leader, takes every queued plan, and commits them as a chain of commits,
one per write, each with its own trailers, author and version (the history is what one-at-a-time
writing makes). Each plan is made against the tip that includes the batch's earlier writes: the
leader indexes each commit as it makes it, inside one index transaction with a savepoint per write,
so preconditions and path collisions stay exact. A plan that fails (precondition, collision, limit)
rolls back to its savepoint and fails alone.

The batch's objects (blobs, trees, commits) are built in memory (``gitmem.git.trees``) and written into
one pack (``gitmem.git.pack.format``) while holding ``main``'s lock, so that the pack files and the lock file
are flushed at the same time (on Linux by one ``syncfs``), and so are the new names afterwards. ``main``
moves once, by compare-and-swap, under the
store's writer lock that serialises writers across processes: a ``flock`` beside a SQLite index, an
advisory lock in the index transaction itself on PostgreSQL (across nodes). Every request is
answered after that: with fsync on, its commit is durable. Once ``main`` has moved nothing turns an
answer into an error: if the index cannot record the new tip, it catches up on the next request.

Stores never wait for each other: the queue, the leader and the lock are per store.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from gitmem import metrics
from gitmem.durable import DURABLE, Durability
from gitmem.engine.index.store_index import StoreIndex
from gitmem.errors import StoreBusy
from gitmem.git import repository
from gitmem.git.commits import VersionRecord, author_for, commit_object, format_message
from gitmem.git.pack.format import PackObject, flush_folders, write_pack
from gitmem.git.signing import Signer
from gitmem.git.trees import TreeCache, TreeStore, object_id
from gitmem.rules.paths import git_path

log = logging.getLogger(__name__)

MAX_CAS_ATTEMPTS = 50


@dataclass(frozen=True)
class Change:
    """What one planned write does: the version record and the tree paths it sets (to a blob id in
    hex) or removes (None)."""

    record: VersionRecord
    tree_changes: dict[str, str | None]
    # The plan found no other note at, above or below the version's path (``check_free``, in the
    # batch's transaction): indexing the version needs no look for notes it would displace.
    path_checked_free: bool = False

    @property
    def blob_id(self) -> str | None:
        """The blob the version's note now has (None for a deletion)."""
        if self.record.operation == "deleted" or self.record.path is None:
            return None
        return self.tree_changes[git_path(self.record.path)]


@dataclass(frozen=True)
class Landed:
    """A write whose commit is on ``main``."""

    change: Change
    commit_id: str


class BatchView:
    """What a plan sees: the index as of the batch's earlier writes, and blobs old and new."""

    def __init__(self, index: StoreIndex, batch_objects: dict[bytes, PackObject]) -> None:
        self.index = index
        self._batch = batch_objects
        self.staged: dict[bytes, PackObject] = {}

    def add_blob(self, data: bytes) -> str:
        oid = object_id(b"blob", data)
        self.staged[oid] = PackObject(b"blob", data, oid)
        return oid.hex()

    def read_blob(self, blob_id: str) -> bytes:
        raw = bytes.fromhex(blob_id)
        made = self.staged.get(raw) or self._batch.get(raw)
        return made.body if made is not None else repository.blob_at(self.index.repo, blob_id).data


Plan = Callable[[BatchView], Change | None]


class _MainMoved(Exception):
    """``main`` moved between reading the tip and the compare-and-swap: the attempt is rolled back."""


@dataclass
class _Request:
    plan: Plan
    signer: Signer | None = None  # the home's key (the same for every request of a store)
    joined: float = field(default_factory=time.perf_counter)  # when it joined the queue
    done: bool = False
    landed: Landed | None = None
    error: BaseException | None = None


@dataclass
class _Outcomes:
    """What each request of an attempt came to, applied only if the attempt lands."""

    items: list[tuple[_Request, Landed | BaseException | None]] = field(default_factory=list)

    def apply(self) -> None:
        for request, outcome in self.items:
            if isinstance(outcome, BaseException):
                request.error = outcome
            else:
                request.landed = outcome
            request.done = True


# What a planned batch comes to: the tip it was planned on, its new tip and root tree, the trees it
# made, the objects to pack and each request's outcome.
_Planned = tuple[pygit2.Oid | None, bytes, bytes, TreeStore, dict[bytes, PackObject], _Outcomes]


class GroupCommitter:
    """The write queue of one store in this process (see the module's docstring)."""

    def __init__(self, repo_path: Path, durability: Durability = DURABLE) -> None:
        self.repo_path = repo_path
        self.durability = durability
        # What each batch flushes: the folder its pack goes to and main's folder.
        self._objects_dir = repo_path / "objects"
        self._flushed_folders = [self._objects_dir / "pack", (repo_path / repository.MAIN).parent]
        self._cond = threading.Condition()
        self._queue: list[_Request] = []
        self._leading = False
        self.trees = TreeCache()  # used by the leader only
        self._last_commit: tuple[bytes, bytes] | None = None  # the last batch's commit and its tree

    def submit(
        self, index: StoreIndex, plan: Plan, after_batch: Callable[[], None], signer: Signer | None = None
    ) -> Landed | None:
        """Run ``plan`` in the next batch; its commit, signed by ``signer``, once on ``main`` (None if it
        changed nothing)."""
        (request,) = self._run(index, [_Request(plan, signer)], after_batch)
        if request.error is not None:
            raise request.error
        return request.landed

    def submit_all(
        self,
        index: StoreIndex,
        plans: Sequence[Plan],
        after_batch: Callable[[], None],
        signer: Signer | None = None,
    ) -> list[Landed | BaseException | None]:
        """Run ``plans`` in one batch, in order (a bulk import): what each came to, its commit on ``main``,
        None, or the error that refused it alone. One pack and one move of ``main`` for them all."""
        requests = self._run(index, [_Request(plan, signer) for plan in plans], after_batch)
        return [request.error if request.error is not None else request.landed for request in requests]

    def _run(self, index: StoreIndex, requests: list[_Request], after_batch: Callable[[], None]) -> list[_Request]:
        """Queue ``requests`` together; lead the batch that takes them unless another leader already did."""
        with self._cond:
            self._queue.extend(requests)
            while self._leading and not requests[-1].done:
                self._cond.wait()
            lead = not requests[-1].done  # a leader takes the whole queue: ours are in one batch
            if lead:
                self._leading = True
                batch, self._queue = self._queue, []
        if lead:
            taken = time.perf_counter()
            for waiting in batch:
                metrics.WRITE_WAIT_SECONDS.observe(taken - waiting.joined)
            try:
                self._commit(index, batch, after_batch)
            except BaseException as exc:
                for other in batch:
                    if not other.done:
                        other.error = exc if other is requests[0] else copy.copy(exc)
                        other.done = True
            finally:
                with self._cond:
                    self._leading = False
                    self._cond.notify_all()
            _count(batch)
        return requests

    def _commit(self, index: StoreIndex, batch: list[_Request], after_batch: Callable[[], None]) -> None:
        with index.batch_lock():
            for _attempt in range(MAX_CAS_ATTEMPTS):
                if self._attempt(index, batch):
                    break
                log.debug("main moved under a batch of writes to %s; retrying", self.repo_path.name)
            else:
                raise StoreBusy("the store kept changing; the write was not made")
        if not any(request.landed for request in batch):
            return  # no pack was written
        try:
            after_batch()
        except Exception:  # the writes landed; a failing packer trigger must not say otherwise
            log.exception("after a batch of writes to %s", self.repo_path.name)

    def _attempt(self, index: StoreIndex, batch: list[_Request]) -> bool:
        """Plan, pack and swap the batch once; False if ``main`` moved meanwhile (nothing changed).

        One index transaction holds the store's writer lock (PostgreSQL: across nodes) from before
        the tip is read until the index rows of the batch are committed, after ``main`` moved."""
        swapped: list[bytes] = []  # the new tip, once main has moved to it
        try:
            with index.writing():
                planned = self._plan(index, batch)
                if planned is None:  # nothing to commit
                    return True
                tip, parent, root, trees, objects, outcomes = planned
                index.flush()  # a row the plan wrote that fails must fail the batch before main moves
                if not self._swap(index.repo, tip, parent, objects):
                    raise _MainMoved
                swapped.append(parent)
                # main has moved: from here on every landed write is answered as landed.
                index.set_tip(parent.hex())
        except _MainMoved:
            return False
        except Exception:
            if not swapped:
                raise
            log.exception("the index of %s could not record its new tip; it catches up later", self.repo_path.name)
        for oid, tree in trees.new.items():
            self.trees.put(oid, tree)
        self._last_commit = (parent, root)
        outcomes.apply()
        return True

    def _plan(self, index: StoreIndex, batch: list[_Request]) -> _Planned | None:
        """Every request planned and indexed against the tip as the batch's earlier writes left it,
        each in a savepoint of the writer's transaction; None if no request changed anything."""
        db, repo = index.db, index.repo
        tip = index.advance()
        trees = TreeStore(self.trees, lambda oid: repository.object_at(repo, oid.hex()).read_raw())
        root = self._tree_of(repo, tip)
        parent = tip.raw if tip is not None else None
        objects: dict[bytes, PackObject] = {}
        outcomes = _Outcomes()
        # A lone write needs no savepoint (a round trip each way on PostgreSQL): if it fails, the
        # whole transaction rolls back and it fails alone all the same.
        savepoints = len(batch) > 1
        for request in batch:
            if savepoints:
                db.execute("SAVEPOINT write")
            view = BatchView(index, objects)
            try:
                change = request.plan(view)
                landed = None
                if change is not None:
                    root_after = trees.edit(
                        root,
                        {path: bytes.fromhex(blob) if blob else None for path, blob in change.tree_changes.items()},
                        like=self._last_commit[1] if self._last_commit is not None else None,
                    )
                    commit = _commit_object(change.record, root_after, parent, request.signer)
                    view.staged[commit.oid] = commit
                    blob = change.blob_id
                    index.apply_version(
                        commit.oid.hex(),
                        change.record,
                        blob,
                        blob_data=view.read_blob(blob) if blob else None,
                        displaces_nothing=change.path_checked_free,
                    )
                    root, parent = root_after, commit.oid
                    landed = Landed(change, commit.oid.hex())
                if savepoints:
                    db.execute("RELEASE write")
            except Exception as exc:  # this write's own failure: the others go on
                if not savepoints:
                    raise
                db.execute("ROLLBACK TO write")
                db.execute("RELEASE write")
                outcomes.items.append((request, exc))
                continue
            objects.update(view.staged)
            outcomes.items.append((request, landed))
        if parent == (tip.raw if tip is not None else None):
            outcomes.apply()
            return None
        objects.update((tree.oid, tree) for tree in trees.pack_objects())
        assert parent is not None and root is not None  # something was committed  # noqa: S101  narrows the type for mypy; never a check of input
        return tip, parent, root, trees, objects, outcomes

    def _swap(
        self, repo: pygit2.Repository, tip: pygit2.Oid | None, parent: bytes, objects: dict[bytes, PackObject]
    ) -> bool:
        """Write the batch's pack and move ``main`` from ``tip`` to ``parent`` (compare-and-swap)."""
        durability = self.durability

        def write_objects(flush_ref: Callable[[], None]) -> None:
            write_pack(
                self._objects_dir,
                list(objects.values()),
                durability=durability,
                flush_with=flush_ref,
                flush_folder=False,
            )

        if not repository.compare_and_swap(
            repo, tip, pygit2.Oid(raw=parent), before_swap=write_objects, flush_folder=False, durability=durability
        ):
            return False
        if durability.flushes:
            # The pack's and the ref's new names, flushed together before anyone is answered. The pack's
            # were made first, so a journal that commits in order (ext4, xfs) never keeps the moved ref
            # without them.
            flush_folders(self._flushed_folders, durability)
        return True

    def _tree_of(self, repo: pygit2.Repository, commit: pygit2.Oid | None) -> bytes | None:
        """The commit's tree id; the last batch's without a lookup (that looks in every pack)."""
        if commit is None:
            return None
        if self._last_commit is not None and self._last_commit[0] == commit.raw:
            return self._last_commit[1]
        return repository.commit_at(repo, commit).tree_id.raw


def _count(batch: list[_Request]) -> None:
    landed = sum(1 for request in batch if request.landed)
    metrics.WRITES.labels("refused").inc(sum(1 for request in batch if request.error is not None))
    if landed:
        metrics.WRITES.labels("committed").inc(landed)
        metrics.WRITE_BATCH_SIZE.observe(landed)


def _commit_object(record: VersionRecord, tree: bytes, parent: bytes | None, signer: Signer | None) -> PackObject:
    author = author_for(record.created_by, record.created_at)
    return commit_object(tree, parent, author, format_message([record]), signer)


# Weakly: a store's handle holds its committer (and the committer its tree cache), so a store the cache
# of open stores closed leaves nothing here (issue 27: 10,000 stores touched kept 10,000 committers).
_committers: weakref.WeakValueDictionary[str, GroupCommitter] = weakref.WeakValueDictionary()
_committers_guard = threading.Lock()


def committer_for(repo_path: Path, durability: Durability = DURABLE) -> GroupCommitter:
    """This process's committer for the store at ``repo_path``, made with ``durability`` (its home's),
    shared by every handle of the store alive in the process; the caller keeps it."""
    # Looked up on every write: the path as given first, so that only a new spelling pays for
    # ``resolve`` (a file-system walk) to find the committer its store already has.
    committer = _committers.get(str(repo_path))
    if committer is not None:
        return committer
    key = str(repo_path.resolve())
    with _committers_guard:
        committer = _committers.get(key)
        if committer is None:
            committer = _committers[key] = GroupCommitter(repo_path, durability)
        _committers[str(repo_path)] = committer
        return committer


__all__ = ["BatchView", "Change", "GroupCommitter", "Landed", "Plan", "committer_for"]
