"""Moving a ref together with the objects it needs: one pack, flushed with the ref's lock file.

What the group commit does for ``main``, for the refs beside it (``refs/conflicts/*``): the objects go
into one pack written while the ref's lock is held (no pack for a swap that fails), the pack and the
lock file are flushed together, and the pack's name and the ref's together after the swap, before the
caller answers anyone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pygit2

from gitmem.durable import DURABLE, Durability, fsync_dir
from gitmem.git import repository
from gitmem.git.pack.format import PackObject, flush_folders, write_pack


def ensure_ref_folder(repo_path: Path, ref: str, durability: Durability = DURABLE) -> None:
    """Make the folder of ``ref`` (``refs/conflicts/``) durably, the first time: its own name must reach
    the disk before a ref inside it counts as written."""
    folder = (repo_path / ref).parent
    if folder.is_dir():
        return
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        made.mkdir(exist_ok=True)
        if durability.flushes:
            fsync_dir(made.parent)


def swap_with_objects(
    repo: pygit2.Repository,
    ref: str,
    old: pygit2.Oid | None,
    new: pygit2.Oid,
    objects: Sequence[PackObject],
    durability: Durability = DURABLE,
) -> bool:
    """Point ``ref`` at ``new`` if it still points at ``old``, writing ``objects`` first; False if the ref
    moved (nothing was written)."""
    repo_path = Path(repo.path)
    ensure_ref_folder(repo_path, ref, durability)
    objects_dir = repo_path / "objects"

    def write_objects(flush_ref: Callable[[], None]) -> None:
        if objects:
            write_pack(objects_dir, list(objects), durability=durability, flush_with=flush_ref, flush_folder=False)
        else:
            flush_ref()

    swapped = repository.compare_and_swap(
        repo, old, new, ref=ref, before_swap=write_objects, flush_folder=False, durability=durability
    )
    if not swapped:
        return False
    if durability.flushes:
        flush_folders([objects_dir / "pack", (repo_path / ref).parent], durability)
    return True


__all__ = ["ensure_ref_folder", "swap_with_objects"]
