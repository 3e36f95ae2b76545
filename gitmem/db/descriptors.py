"""The process's file descriptors: its limit, how many are free, and what to do when they run out.

An open store holds descriptors (:mod:`gitmem.engine.open_stores`); so do the catalog's connections,
sockets and Git's pipes. When an open fails for want of one, whoever holds descriptors it could give
back is asked to (:func:`relieve`: the cache of open stores closes idle ones) and the open is tried
again; only when nothing can be given back does the failure stand.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable

log = logging.getLogger(__name__)


def descriptor_limit() -> int | None:
    """The process's soft limit on open files (``None`` if unlimited or unknown)."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError):
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


def open_descriptors() -> int | None:
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # the listing's own descriptor
    except OSError:
        return None


def free_descriptors() -> int | None:
    limit, used = descriptor_limit(), open_descriptors()
    return None if limit is None or used is None else max(0, limit - used)


def raise_descriptor_limit() -> tuple[int, int] | None:
    """Raise the soft limit on open files to the hard limit (what ``gitmem serve`` does at start);
    returns (before, after), or ``None`` if it could not be read."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return int(soft), int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    except (ImportError, OSError, ValueError):
        return None


def low_water(limit: int | None) -> int:
    """Free descriptors under which a cold open first closes idle stores."""
    return 32 if limit is None else max(16, min(128, limit // 8))


def out_of_descriptors(exc: BaseException) -> bool:
    """Whether ``exc`` is the OS, SQLite or libgit2 saying the process has no descriptor left. SQLite
    and libgit2 say only that a file could not be opened, so they count when free descriptors are low."""
    if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
        return True
    text = str(exc).lower()
    if "too many open files" in text:
        return True
    if (isinstance(exc, sqlite3.OperationalError) and "unable to open" in text) or "could not open" in text:
        free, limit = free_descriptors(), descriptor_limit()
        return free is not None and free < low_water(limit)
    return False


_relievers: list[weakref.WeakMethod[Callable[[], int]]] = []
_relievers_lock = threading.Lock()


def when_short(relieve: Callable[[], int]) -> None:
    """Ask the bound method ``relieve`` (held weakly) to give back descriptors when the process runs
    short; it returns how many holders it closed."""
    with _relievers_lock:
        _relievers[:] = [r for r in _relievers if r() is not None]
        _relievers.append(weakref.WeakMethod(relieve))


def relieve() -> int:
    """Ask every holder to give back descriptors; how many holders were closed in all."""
    with _relievers_lock:
        live = [m for r in _relievers if (m := r()) is not None]
    closed = 0
    for method in live:
        try:
            closed += method()
        except Exception:  # housekeeping on a failure path: never a second failure
            log.warning("giving back descriptors failed", exc_info=True)
    return closed


__all__ = [
    "descriptor_limit",
    "free_descriptors",
    "low_water",
    "open_descriptors",
    "out_of_descriptors",
    "raise_descriptor_limit",
    "relieve",
    "when_short",
]
