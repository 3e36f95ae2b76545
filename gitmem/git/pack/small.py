"""A small store's consolidation, in this process: every object into one pack, without starting git.

A store of a few small notes is consolidated whenever it goes quiet in more than one pack
(:data:`gitmem.git.pack.packing.SMALL_STORE_BYTES`), so that at rest it costs what Git costs. With
``git repack`` that is a git process and two ``pack-objects`` (about 7 ms of a quiet machine's time a
store): a server writing 10,000 stores in a few minutes had one thread consolidating them one by one
behind its writers, and a store written early was still in two packs minutes after its last write
(72 KiB at rest instead of 64; issue 27). Here a store of a few dozen objects reads them from its
packs and loose files and writes them as one pack (:func:`gitmem.git.pack.format.write_pack`: named
by its checksum, flushed, then renamed into place), then deletes what it replaced.

It does only what ``git repack`` would do the same way: when every object is reachable from a ref. An
unreachable object (a write that lost its compare-and-swap) is git's to keep for its grace period in
a cruft pack, and a pack with a ``.keep`` (a push not yet referenced) is git's to leave alone, so such a
store is left to :func:`gitmem.git.pack.packing.pack`'s ``git repack``. The caller holds the store's
pack lock, as for any packer.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

import pygit2

from gitmem.durable import DURABLE, NOT_FLUSHED
from gitmem.git.pack.format import PackObject, write_pack
from gitmem.git.pack.roll_up import loose_object_ids, remove_packs

log = logging.getLogger(__name__)

_KINDS = {pygit2.GIT_OBJECT_COMMIT: b"commit", pygit2.GIT_OBJECT_TREE: b"tree", pygit2.GIT_OBJECT_BLOB: b"blob"}


def reachable(repo: pygit2.Repository) -> set[pygit2.Oid] | None:
    """Every object the refs lead to (commits, their parents, trees and blobs); ``None`` if one is
    missing or of a kind a store does not hold (a tag, a submodule's commit)."""
    seen: set[pygit2.Oid] = set()
    try:
        targets = [repo.references[name].resolve().target for name in repo.references]
        commits = [target for target in targets if isinstance(target, pygit2.Oid)]  # a resolved ref names an id
        while commits:
            oid = commits.pop()
            if oid in seen:
                continue
            seen.add(oid)
            commit = repo[oid]
            if not isinstance(commit, pygit2.Commit):
                return None
            commits.extend(commit.parent_ids)
            trees = [commit.tree_id]
            while trees:
                tree_id = trees.pop()
                if tree_id in seen:
                    continue
                seen.add(tree_id)
                for entry in repo[tree_id]:
                    if entry.type == pygit2.GIT_OBJECT_TREE:
                        trees.append(entry.id)
                    elif entry.type == pygit2.GIT_OBJECT_BLOB:
                        seen.add(entry.id)
                    else:
                        return None
    except (KeyError, pygit2.GitError):
        return None
    return seen


def consolidate(repo_path: Path, *, fsync: bool) -> bool:
    """Put every object of the store into one new pack and delete the packs and loose objects it
    replaces. False, with nothing changed, if some object is unreachable or unreadable (git's work)."""
    objects_dir = repo_path / "objects"
    pack_dir = objects_dir / "pack"
    if any(pack_dir.glob("pack-*.keep")) or any(pack_dir.glob("pack-*.mtimes")):
        return False  # a push's pack not yet referenced, or git's cruft pack: git's to repack
    old_packs = sorted(pack_dir.glob("pack-*.pack"))  # listed first: all read below
    loose = loose_object_ids(objects_dir)
    objects = _every_object(repo_path)
    if objects is None:
        return False
    new_pack = write_pack(objects_dir, objects, durability=DURABLE if fsync else NOT_FLUSHED)
    remove_packs(pack_dir, [pack for pack in old_packs if pack != new_pack])
    for raw in loose:
        name = raw.hex()
        folder = objects_dir / name[:2]
        (folder / name[2:]).unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # not empty yet, or gone already
            os.rmdir(folder)
    log.debug("consolidated %s in this process: %d objects", repo_path.name, len(objects))
    return True


def _every_object(repo_path: Path) -> list[PackObject] | None:
    """The store's objects, if every one is reachable and of a kind a pack of ours holds."""
    repo = pygit2.Repository(str(repo_path))
    try:  # freed now: a repository lives in reference cycles, its packs open until a collection
        everything = set(repo.odb)
        if reachable(repo) != everything:
            return None
        objects = []
        for oid in everything:
            kind, body = repo.odb.read(oid)
            if kind not in _KINDS:
                return None
            objects.append(PackObject(_KINDS[kind], body, oid.raw))
        return objects
    finally:
        repo.free()
