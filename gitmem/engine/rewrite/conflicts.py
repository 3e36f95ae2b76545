"""Rewriting the conflict lines: retention drops old conflicts, redaction blanks one, key rotation
re-encrypts them, and what only the old lines held is physically purged (docs/conflicts.md).

Each note's line (``refs/conflicts/<memory id>``) is made anew from its first changed record on, with
every record's trailers, author and time kept; a dropped conflict takes its resolution with it, a line
left empty loses its ref. Safety is the history rewrite's (:mod:`gitmem.engine.rewrite.rewrite`):

1. under ``gitmem/rewrite.lock`` and the writer lock (so no conflict is kept meanwhile: keeping one
   takes the writer lock too), read every line and plan it;
2. write the new lines' objects as one pack, then the purge marker naming the blobs only the old lines
   held, then move each ref by compare-and-swap;
3. purge (:func:`gitmem.engine.rewrite.purge.purge_locked`) and verify that every such blob is unreadable.

With ``purge=False`` step 3 is left to the caller's own rewrite that follows (retention and rotation
rewrite ``main`` next; that rewrite reads the marker and purges and verifies both at once). A crash
leaves each ref on its old line or its new one, and the marker makes the next rewrite finish the purge.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pygit2

from gitmem.clock import to_micros
from gitmem.engine.rewrite.locked_git import checkpoint, git_ok, rewrite_lock, writer_lock
from gitmem.engine.rewrite.purge import (
    marker,
    objects_size,
    purge_locked,
    read_marker,
    scrub_index,
    verify,
    write_marker,
)
from gitmem.engine.rewrite.report import RewriteReport
from gitmem.engine.store.conflicts import EMPTY_TREE_OBJECT, Entry, conflict_commit, content_tree, noted_ids, read_line
from gitmem.errors import StoreBusy
from gitmem.git import repository
from gitmem.git.conflict_records import ConflictRecord, ResolutionRecord, conflict_ref
from gitmem.git.pack.format import PackObject, write_pack
from gitmem.git.signing import Signer
from gitmem.git.trees import EMPTY_TREE_ID
from gitmem.rules.paths import git_path

if TYPE_CHECKING:
    from gitmem.engine.store.store import MemoryStore

log = logging.getLogger(__name__)

# What a plan makes of a conflict record: the same record (kept), a redacted one (blanked) or None (dropped).
ConflictPlan = Callable[[ConflictRecord], ConflictRecord | None]
# A re-encryption: the tree path and a record's blob, to the blob it becomes (itself if already so).
Reencode = Callable[[str, bytes], bytes]


@dataclass
class ConflictRewriteReport:
    store_id: str
    dropped: list[str] = field(default_factory=list)  # conflict ids
    redacted: list[str] = field(default_factory=list)
    reencoded: int = 0
    lines_changed: int = 0
    gone: set[str] = field(default_factory=set)  # blobs only the old lines held
    purge: RewriteReport | None = None

    @property
    def changed(self) -> bool:
        return self.lines_changed > 0


@dataclass
class _NewLine:
    memory_id: str
    old_tip: pygit2.Oid
    new_tip: pygit2.Oid | None  # None: the line is empty now and its ref goes


def rewrite_conflicts(
    store: MemoryStore,
    plan: ConflictPlan,
    *,
    reencode: Reencode | None = None,
    purge: bool = True,
    lock_timeout: float = 60.0,
    erased: Callable[[ConflictRewriteReport], None] | None = None,
) -> ConflictRewriteReport:
    """Apply ``plan`` (and ``reencode``) to every conflict of ``store``; see the module's docstring.
    ``erased`` is told, under the locks right after the refs move, what was dropped and redacted (the
    erasure ledger; a failure there is logged and the rewrite goes on)."""
    report = ConflictRewriteReport(store.id)
    with rewrite_lock(store.path, lock_timeout), writer_lock(store):
        repo = store.repo
        objects: dict[bytes, PackObject] = {}
        kept: set[str] = set()  # blobs the new lines hold (a dropped text may be another's too)
        lines = [
            line
            for memory_id in noted_ids(repo)
            if (line := _rewrite_line(repo, memory_id, plan, reencode, objects, kept, report, store.signer)) is not None
        ]
        if not lines:
            return report
        report.gone -= kept
        if objects:
            write_pack(store.path / "objects", list(objects.values()), durability=store.durability)
        write_marker(store.path, (read_marker(store.path) or set()) | report.gone)
        checkpoint("conflicts-before-swap")
        for line in lines:
            _swap(store, line)
        report.lines_changed = len(lines)
        if erased is not None and (report.dropped or report.redacted):
            try:
                erased(report)
            except Exception:
                log.exception("%s: the erasure ledger could not record this conflict rewrite", store.id)
        if purge:
            report.purge = RewriteReport(store.id, bytes_before=objects_size(store.path))
            purge_locked(store.path, store.signer)
    if purge and report.purge is not None:
        scrub_index(store)
        pending = read_marker(store.path) or set()
        verify(store.path, pending, report.purge)
        marker(store.path).unlink(missing_ok=True)
        report.purge.bytes_after = objects_size(store.path)
    log.info(
        "%s: conflicts rewritten (%d dropped, %d redacted, %d re-encoded)",
        store.id,
        len(report.dropped),
        len(report.redacted),
        report.reencoded,
    )
    return report


def _swap(store: MemoryStore, line: _NewLine) -> None:
    ref = conflict_ref(line.memory_id)
    if line.new_tip is None:
        git_ok(store.path, "update-ref", "-d", ref, str(line.old_tip))
        return
    if not repository.compare_and_swap(store.repo, line.old_tip, line.new_tip, ref=ref, durability=store.durability):
        raise StoreBusy(
            f"the conflicts of memory {line.memory_id} moved during a rewrite"
        )  # the writer lock forbids it


def _rewrite_line(
    repo: pygit2.Repository,
    memory_id: str,
    plan: ConflictPlan,
    reencode: Reencode | None,
    objects: dict[bytes, PackObject],
    kept: set[str],
    report: ConflictRewriteReport,
    signer: Signer | None,
) -> _NewLine | None:
    """The line of ``memory_id`` made anew (its objects added to ``objects``); None if nothing changes."""
    line = read_line(repo, memory_id)
    if not line:
        return None
    dropped: set[str] = set()
    parent: bytes | None = None
    changed = False
    for entry in line:
        record = entry.record
        tree = bytes.fromhex(entry.tree_id)
        if isinstance(record, ResolutionRecord):
            if record.conflict_id in dropped:
                changed = True
                continue
        else:
            decided = plan(record)
            if decided is None:
                dropped.add(record.conflict_id)
                report.dropped.append(record.conflict_id)
                report.gone |= _blobs_of(repo, entry)
                changed = True
                continue
            if decided.redacted_at is not None and record.redacted_at is None:
                report.redacted.append(record.conflict_id)
                report.gone |= _blobs_of(repo, entry)
                tree, record, changed = EMPTY_TREE_ID, decided, True
                objects[EMPTY_TREE_ID] = EMPTY_TREE_OBJECT
            elif reencode is not None and record.has_content and record.path is not None:
                new_tree, new_blob = _reencoded(repo, entry, record.path, reencode, objects)
                if new_tree != tree:
                    report.gone |= _blobs_of(repo, entry)
                    report.reencoded += 1
                    tree, changed = new_tree, True
                    kept.add(new_blob)
                else:
                    kept |= _blobs_of(repo, entry)
            elif record.has_content:
                kept |= _blobs_of(repo, entry)
        if not changed:
            parent = bytes.fromhex(entry.commit_id)  # the line is the same up to here: keep its commits
            continue
        commit = conflict_commit(record, tree, parent, signer)
        objects[commit.oid] = commit
        parent = commit.oid
    if not changed:
        return None
    old_tip = pygit2.Oid(hex=line[-1].commit_id)
    return _NewLine(memory_id, old_tip, pygit2.Oid(raw=parent) if parent is not None else None)


def _blobs_of(repo: pygit2.Repository, entry: Entry | str) -> set[str]:
    tree = repository.tree_at(repo, entry.tree_id if isinstance(entry, Entry) else entry)
    out: set[str] = set()
    stack = [tree]
    while stack:
        for item in stack.pop():
            if item.type_str == "tree":
                stack.append(repository.tree_at(repo, item.id))
            else:
                out.add(str(item.id))
    return out


def _reencoded(
    repo: pygit2.Repository, entry: Entry, path: str, reencode: Reencode, objects: dict[bytes, PackObject]
) -> tuple[bytes, str]:
    """The record's tree and blob with its text re-encoded (the same ones if it is already so)."""
    tree_path = git_path(path)
    old_blob = repository.tree_at(repo, entry.tree_id)[tree_path]
    data = repository.blob_at(repo, old_blob.id).data
    new = reencode(tree_path, data)
    if new == data:
        return bytes.fromhex(entry.tree_id), str(old_blob.id)
    tree, made = content_tree(path, new)
    for obj in made:
        objects[obj.oid] = obj
    return tree, made[0].oid.hex()


def expired(cutoff_micros: int) -> ConflictPlan:
    """Retention: conflicts kept at or before the cutoff go."""
    return lambda record: None if to_micros(record.created_at) <= cutoff_micros else record


__all__ = ["ConflictPlan", "ConflictRewriteReport", "Reencode", "expired", "rewrite_conflicts"]
