"""Rolling a store's small packs and loose objects up into one pack, without a walk of its history.

This is the geometric half of packing (:mod:`gitmem.git.pack.packing`): the packs that do not already form a
geometric progression (each at least twice the objects of all smaller ones together) are rolled into
one, with the loose objects, so a store keeps few packs and little is rewritten each time.

``git repack --geometric`` does the same, but hands git the packs by name (``pack-objects
--stdin-packs``), and git then walks every commit in them and every tree under those commits only to
name the objects for its delta search. In a store with a 10,000-note folder each commit's tree is that
folder, so the walk was most of a roll-up's CPU (measured: 49 of 82 ms for the packs of 16 writes,
more than the writes themselves). Here the objects are read from the packs' indexes and handed to
``git pack-objects`` as a list, each with its path where :func:`object_names` finds one: git searches
deltas among objects of the same name first, so a folder's tree is compared with its own earlier
versions, not with other folders' of a similar size (without names, a store of 100 folders packed to
twice the size between full packs). The names come from the new commits' trees, read only where they
are new themselves and small: a 10,000-note folder is named, not read. Only the commits of batch packs
are walked: the objects of a pack an earlier roll-up made were named then and keep the deltas git
found for them (walking them again made a roll-up's naming grow with the store, 87 ms for one of 2,676
objects in a store of 2,000 notes).

Safety is git's own: the new pack is complete, flushed and in place (its folder flushed too) before a
rolled pack is deleted, and deleted ``.pack`` first, so a kill leaves at worst an index without its
pack, which git ignores (see :mod:`gitmem.git.pack.leftovers`). Kept packs (``.keep``) and cruft packs
(``.mtimes``: unreachable objects waiting out their grace) are never rolled.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pygit2

from gitmem.durable import fsync_dir
from gitmem.git.pack.format import index_object_count, index_object_ids

log = logging.getLogger(__name__)

FACTOR = 2
# What git keeps beside a pack; the .idx goes last (a pack without its index stops ``git repack``).
PACK_FILES = (".pack", ".rev", ".bitmap", ".idx")
_LOOSE_FOLDER = re.compile(r"[0-9a-f]{2}")
_LOOSE_NAME = re.compile(r"[0-9a-f]{38}")
# Each object is compared with the 3 before it in git's order (by name, then size) for a delta, not
# git's 10: the versions of a folder's tree lie side by side, so a wider window found nothing smaller
# (python -m bench.roll_up: the same bytes at twice the CPU; a window of 1 left a big tree whole).
WINDOW = 3
_TREE_ENTRY = re.compile(rb"(\d+) ([^\0]+)\0(.{20})", re.DOTALL)  # mode, name, object id
# Trees up to this size are read to name the new objects under them; a bigger one is named only.
MAX_READ_TREE_BYTES = 64 << 10
# A pack of more objects than this was made by an earlier roll-up (a batch of 64 writes makes ~256).
BATCH_PACK_MAX_OBJECTS = 256


@dataclass(frozen=True)
class Pack:
    """A pack in ``objects/pack``, by its ``.pack`` path, and the objects its index lists."""

    path: Path
    objects: int


def remove_packs(pack_dir: Path, packs: Iterable[Path]) -> None:
    """Delete ``packs`` (``.pack`` paths in ``pack_dir``) and the files beside them, the index last:
    only the files one listing found (an unlink of a file that is not there cost 35-40 µs on ext4
    here, two of them a pack: most packs have neither a ``.rev`` nor a ``.bitmap``)."""
    present = set(os.listdir(pack_dir))
    for pack in packs:
        for suffix in PACK_FILES:
            name = pack.stem + suffix
            if name in present:
                (pack_dir / name).unlink(missing_ok=True)  # a packer elsewhere may have taken it already


def rollable_packs(pack_dir: Path) -> list[Pack]:
    """The packs a roll-up may take, fewest objects first: indexed, neither kept nor cruft."""
    packs = []
    for path in pack_dir.glob("pack-*.pack"):
        if path.with_suffix(".keep").exists() or path.with_suffix(".mtimes").exists():
            continue
        try:
            packs.append(Pack(path, index_object_count(path.with_suffix(".idx"))))
        except FileNotFoundError:  # no index yet (a writer between its renames), or just rolled up
            continue
    return sorted(packs, key=lambda pack: (pack.objects, pack.path.name))


def geometric_split(packs: list[Pack], factor: int = FACTOR) -> list[Pack]:
    """The packs (of ``packs``, fewest objects first) to roll into one so that the new pack and the
    rest form a progression where each pack holds at least ``factor`` times the objects of all smaller
    ones. The same choice as ``git repack --geometric``."""
    if not packs:
        return []
    split = len(packs) - 1
    while split > 0 and packs[split].objects >= factor * packs[split - 1].objects:
        split -= 1
    if split:
        split += 1  # the heavier of the last pair compared is not in the progression
    total = sum(pack.objects for pack in packs[:split])
    while split < len(packs) and packs[split].objects < factor * total:
        total += packs[split].objects
        split += 1
    return packs[:split]


def loose_object_ids(objects_dir: Path) -> list[bytes]:
    found = []
    with os.scandir(objects_dir) as listing:
        folders = list(listing)
    for folder in folders:
        if not _LOOSE_FOLDER.fullmatch(folder.name):
            continue
        try:
            names = os.listdir(folder.path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        found += [bytes.fromhex(folder.name + name) for name in names if _LOOSE_NAME.fullmatch(name)]
    return found


def object_names(repo_path: Path, ids: set[bytes], new: set[bytes] | None = None) -> dict[bytes, bytes]:
    """Paths for the trees and blobs among ``ids`` that the commits among ``new`` (default: ``ids``)
    lead to through trees among ``new`` (what those commits changed), as git's own walk would name
    them. An entry among ``ids`` but not ``new`` is named where a walked tree lists it, not read: an
    older version of a folder's tree is named like the new ones, to be compared with them. Trees are
    parsed from their raw bytes: this runs in the writing process, beside its writers."""
    walked = ids if new is None else new
    repo = pygit2.Repository(str(repo_path))
    try:  # freed now: a repository lives in reference cycles, its packs open until a collection
        return _names(repo.odb, ids, walked)
    finally:
        repo.free()


def _names(odb: pygit2.Odb, ids: set[bytes], walked: set[bytes]) -> dict[bytes, bytes]:
    names: dict[bytes, bytes] = {}

    def walk(tree_id: bytes, path: bytes) -> None:
        names[tree_id] = path
        oid = pygit2.Oid(raw=tree_id)
        if odb.read_header(oid)[1] > MAX_READ_TREE_BYTES:
            return
        for mode, name, entry_id in _TREE_ENTRY.findall(odb.read(oid)[1]):
            if entry_id in ids and entry_id not in names:
                entry_path = path + b"/" + name if path else name
                if mode == b"40000" and entry_id in walked:
                    walk(entry_id, entry_path)
                else:
                    names[entry_id] = entry_path

    for raw in walked:
        oid = pygit2.Oid(raw=raw)
        if odb.read_header(oid)[0] == pygit2.GIT_OBJECT_COMMIT:
            tree_id = bytes.fromhex(odb.read(oid)[1][5:45].decode())  # a commit starts "tree <id>\n"
            if tree_id in walked and tree_id not in names:
                walk(tree_id, b"")
    return names


def _listing(ids: Iterable[bytes], names: dict[bytes, bytes]) -> bytes:
    """``pack-objects``' input: an object id a line, with its path if it has one."""
    lines = []
    for oid in sorted(ids):
        name = names.get(oid)
        line = oid.hex().encode()
        lines.append(line + b" " + name + b"\n" if name and b"\n" not in name else line + b"\n")
    return b"".join(lines)


def roll_up(repo_path: Path, *, depth: int, fsync: bool, lock_fd: int | None = None) -> bool:
    """Roll the store's small packs and its loose objects into one pack, with delta chains up to
    ``depth`` long; False if there was nothing to roll. ``lock_fd`` (the pack lock) is held by git too
    while it runs. Raises :class:`subprocess.CalledProcessError` if git fails (nothing was deleted)."""
    objects_dir = repo_path / "objects"
    pack_dir = objects_dir / "pack"
    rolled = geometric_split(rollable_packs(pack_dir))
    loose = loose_object_ids(objects_dir)
    if len(rolled) < 2 and not loose:
        return False
    ids, new = set(loose), set(loose)
    for pack in rolled:
        listed = index_object_ids(pack.path.with_suffix(".idx"))
        ids.update(listed)
        if pack.objects <= BATCH_PACK_MAX_OBJECTS:
            new.update(listed)
    try:
        names = object_names(repo_path, ids, new)
    except (KeyError, ValueError, UnicodeDecodeError, pygit2.GitError):  # names only guide git's delta search
        log.debug("could not name the objects rolled up in %s", repo_path.name, exc_info=True)
        names = {}
    listing = _listing(ids, names)
    proc = subprocess.run(  # noqa: S603  an argument list (no shell) of our own
        [  # noqa: S607  git from PATH, an argument list (no shell)
            "git",
            "-C",
            str(repo_path),
            "pack-objects",
            "-q",
            "--delta-base-offset",
            f"--depth={depth}",
            f"--window={WINDOW}",
            str(pack_dir / "pack"),
        ],
        input=listing,
        capture_output=True,
        pass_fds=(lock_fd,) if lock_fd is not None else (),
    )
    if proc.returncode != 0:
        log.warning("git pack-objects failed for %s: %s", repo_path.name, proc.stderr.decode(errors="replace").strip())
        raise subprocess.CalledProcessError(proc.returncode, proc.args, proc.stdout, proc.stderr)
    new_pack = pack_dir / f"pack-{proc.stdout.decode().strip()}.pack"
    if fsync:
        fsync_dir(pack_dir)  # the new pack's name is durable before the rolled ones' go
    remove_packs(pack_dir, [pack.path for pack in rolled if pack.path != new_pack])
    if loose:
        subprocess.run(["git", "-C", str(repo_path), "prune-packed", "-q"], capture_output=True, check=False)  # noqa: S603, S607  git from PATH, an argument list (no shell)
    return True
