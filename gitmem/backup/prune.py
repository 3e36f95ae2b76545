"""``gitmem backup prune --older-than``: backups past the retention window go, and destroyed keys
leave every backup.

A backup is dropped once it began longer ago than the window; the newest backup under the
destination is always kept, however old, so pruning never leaves nothing to restore. A hard-linked
bundle shared with a kept backup stays on disk through the kept one's link.

A store's data key is destroyed when the store (or the profile whose bank it is) is deleted. Backups
made before that hold the key wrapped by the master key, so after every backup and every prune each
backup under the destination loses the wrapped keys of stores the home's erasure ledger says were
deleted (:func:`forget_destroyed_keys`): the store's bundle is ciphertext without it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from gitmem.backup.layout import KEYS, PARTIAL, backups, read_manifest, started
from gitmem.clock import system_clock
from gitmem.engine.catalog.erasures import ErasureLedger

log = logging.getLogger(__name__)


def prune_backups(dest: Path, older_than: dt.timedelta, *, now: dt.datetime | None = None) -> list[Path]:
    """Delete the backups under ``dest`` that began before ``now - older_than`` (never the newest), and
    any unfinished one left by a crash; the folders deleted."""
    cutoff = (now or system_clock()) - older_than
    found = backups(dest)
    dropped = [folder for folder in found[:-1] if started(read_manifest(folder)) < cutoff]
    for folder in dropped:
        shutil.rmtree(folder)
        log.info("dropped backup %s", folder)
    for partial in dest.glob(PARTIAL + "*") if dest.is_dir() else []:
        if partial.is_dir() and dt.datetime.fromtimestamp(partial.stat().st_mtime, dt.UTC) < cutoff:
            shutil.rmtree(partial, ignore_errors=True)
            dropped.append(partial)
    return dropped


def forget_destroyed_keys(dest: Path, ledger: ErasureLedger) -> int:
    """Remove, from every backup under ``dest``, the wrapped keys of stores deleted since; how many."""
    deleted = {e.store_id for e in ledger.since(0, "store_deleted")}
    removed = 0
    if not deleted:
        return 0
    for folder in backups(dest):
        removed += _without_keys(folder / KEYS, deleted)
    return removed


def _without_keys(path: Path, owners: set[str]) -> int:
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return 0
    held = data.get("owners", {})
    gone = owners & set(held)
    if not gone:
        return 0
    data["owners"] = {o: keys for o, keys in held.items() if o not in gone}
    fd, tmp = tempfile.mkstemp(prefix=".keys.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)  # a new inode: a hard-linked copy elsewhere is not shared (keys are never linked)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    log.info("%s: forgot the destroyed keys of %s", path, ", ".join(sorted(gone)))
    return len(gone)


__all__ = ["forget_destroyed_keys", "prune_backups"]
