"""What a packer that failed or was killed leaves in ``objects/pack``, and its removal.

A ``git repack`` that fails (a full disk) or is killed leaves temporary pack files; :func:`gitmem.git.packing.pack`
removes those it made, under the store's pack lock. (An index left without its pack, by a repack killed
while it deleted the packs it had replaced, needs nothing: git does not load an index whose pack is gone.)
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

TEMPORARY_PACK_GRACE = 2.0
TEMPORARY_PACK_FILES = ("tmp_pack_*", "tmp_idx_*", "tmp_rev_*", "tmp_mtimes_*", ".tmp-*")


def temporary_packs(pack_dir: Path) -> set[Path]:
    return {path for pattern in TEMPORARY_PACK_FILES for path in pack_dir.glob(pattern)}


def _open_by_any_process(folder: Path) -> set[str]:
    """Files in ``folder`` some process has open (Linux ``/proc``; elsewhere: none known)."""
    held: set[str] = set()
    prefix = str(folder.resolve()) + os.sep
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        with contextlib.suppress(OSError):
            for fd in os.scandir(fd_dir):
                with contextlib.suppress(OSError):
                    target = os.readlink(fd.path)
                    if target.startswith(prefix):
                        held.add(target)
    return held


def remove_temporary_packs(pack_dir: Path, existing: set[Path]) -> None:
    """Remove what a failed ``git repack`` left (a full disk, a kill): temporary pack files that were not
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
