"""What only the SQLite file of a store's index needs: finding it damaged and setting it aside.

The index is derived from Git, so a damaged file (garbage bytes, a file cut short) is moved aside and
rebuilt from history rather than repaired (:class:`gitmem.engine.index.store_index.StoreIndex`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from pathlib import Path

log = logging.getLogger("gitmem.engine.index.store_index")  # what an operator has always seen it as

_DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}  # not "locked" or "busy": those are not damage


# (path, inode, size, mtime) of index files this process checked whole, or closed cleanly itself
_verified: set[tuple[str, int, int, int]] = set()


def _probe(path: Path) -> None:
    """Open ``path`` and read it whole once per file (and size) in this process: a file cut short can
    open and answer the first queries, and ``quick_check`` reads every page (about 35 ms for 50,000
    versions). Raises ``sqlite3.DatabaseError`` if it is damaged."""
    if not path.exists():
        return
    stat = path.stat()
    key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key in _verified:
        return
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
        damage = [row[0] for row in db.execute("PRAGMA quick_check")]
    if damage != ["ok"]:
        raise sqlite3.DatabaseError("; ".join(map(str, damage[:3])))
    _verified.add(key)


def mark_sound(path: Path) -> None:
    """``path`` is as this process left it, its connections closed cleanly (a store closed by the
    cache of open stores): reopening it skips the whole read, unless another process changed it."""
    try:
        stat = path.stat()
    except OSError:
        return
    _verified.add((str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns))


def set_aside_if_damaged(path: Path) -> Path | None:
    """The index is derived from Git, so a damaged one (garbage bytes, a file cut short) is moved aside
    as ``index.sqlite3.corrupt-<time>`` and ``catch_up`` fills a new one from history. Returns where a
    damaged file was set aside (``None`` if it was sound)."""
    try:
        found = path.stat().st_ino
    except FileNotFoundError:
        return None
    try:
        _probe(path)
        return None
    except sqlite3.DatabaseError as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(exc, sqlite3.OperationalError) or (code is not None and code not in _DAMAGED):
            raise
        reason = str(exc)
    aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    try:
        # Only the file found damaged: another process may already have set it aside and made a new one.
        if path.stat().st_ino == found:
            path.rename(aside)
            for suffix in ("-wal", "-shm"):  # a stale log must never be replayed into the new file
                sidecar = path.with_name(path.name + suffix)
                if sidecar.exists():
                    sidecar.rename(aside.with_name(aside.name + suffix))
            log.warning("index %s was damaged (%s); set aside as %s and rebuilt from history", path, reason, aside.name)
    except FileNotFoundError:
        pass
    return aside


__all__ = ["mark_sound", "set_aside_if_damaged"]
