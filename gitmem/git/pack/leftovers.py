"""What a writer or packer that failed or was killed leaves in ``objects/pack``, and its mending.

:func:`gitmem.git.pack.packing.pack` mends it under the store's pack lock:

- a packer's git (a roll-up's ``pack-objects``, a full ``repack``) that fails (a full disk) leaves
  temporary pack files: removed after it;
- a writer or a packer killed between renaming a new pack into place and renaming its index after it
  leaves a pack without an index: indexed before each pack run (:func:`index_lone_packs`);
- a packer killed while it deletes the packs it replaced leaves an index without its pack: nothing to
  do, git does not load an index whose pack is gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import time
from pathlib import Path

log = logging.getLogger(__name__)

TEMPORARY_PACK_GRACE = 2.0
TEMPORARY_PACK_FILES = ("tmp_pack_*", "tmp_idx_*", "tmp_rev_*", "tmp_mtimes_*", ".tmp-*")


def temporary_packs(pack_dir: Path) -> set[Path]:
    return {path for pattern in TEMPORARY_PACK_FILES for path in pack_dir.glob(pattern)}


def _open_by_any_process(folder: Path) -> set[str]:
    """Files in ``folder`` some process has open (Linux ``/proc``; elsewhere: none known)."""
    held: set[str] = set()
    prefix = str(folder.resolve()) + os.sep
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        with contextlib.suppress(OSError), os.scandir(fd_dir) as fds:
            for fd in fds:
                with contextlib.suppress(OSError):
                    target = os.readlink(fd.path)
                    if target.startswith(prefix):
                        held.add(target)
    return held


def remove_temporary_packs(pack_dir: Path, existing: set[Path]) -> None:
    """Remove what a packer's failed git left (a full disk, a kill): temporary pack files that were not
    there before it ran and that no process has open or renames within :data:`TEMPORARY_PACK_GRACE`
    seconds (the write path and a history rewrite write their own ``tmp_pack_*`` next to ours)."""
    candidates = temporary_packs(pack_dir) - existing
    if not candidates:
        return
    time.sleep(TEMPORARY_PACK_GRACE)
    held = _open_by_any_process(pack_dir)
    for path in candidates:
        with contextlib.suppress(FileNotFoundError):
            if str(path.resolve()) not in held:
                path.unlink()


def index_lone_packs(repo_path: Path) -> None:
    """Give an index to each pack of the store that has none. Git reads packs through their index and
    ignores such a pack, but ``git repack --cruft`` lists packs by their ``.pack`` file and stops on it
    ("could not find pack"). Indexing it, not deleting it, is safe beside a writer that is between its
    two renames: the writer's own index for the same pack then replaces this one."""
    for pack in (repo_path / "objects" / "pack").glob("pack-*.pack"):
        if pack.with_suffix(".idx").exists():
            continue
        proc = subprocess.run(["git", "-C", str(repo_path), "index-pack", str(pack)], capture_output=True)  # noqa: S603, S607  git from PATH, an argument list (no shell)
        if proc.returncode != 0 and not pack.with_suffix(".idx").exists():
            log.warning("%s has no index and git cannot index it: %s", pack, proc.stderr.decode(errors="replace"))
