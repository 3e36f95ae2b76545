"""Making writes durable: a file's name reaches the disk only with its folder; a whole file system's
writes reach it with one ``syncfs(2)``. How far a home goes (``GITMEM_FSYNC``) is its own
:class:`Durability`, handed to what writes for it: never a switch of the process.

A ``syncfs`` flushes everything written to its file system, whoever wrote it, so the writers of a
process share them (:class:`FlushGroup`, one per file system, which every store of a home is on): a
writer that asks for a flush while another's is on its way waits for the next one, which covers every
writer that asked meanwhile (the way PostgreSQL's group commit lets many transactions share one WAL
flush). Eight stores whose batches are ready at the same moment pay for one pair of flushes, not eight;
each writer still returns only once a flush that began after its own writes has ended.
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

_libc = ctypes.CDLL(None, use_errno=True)  # the os module has no syncfs
# syncfs(2) is Linux's; elsewhere writers flush file by file and folder by folder.
CAN_FLUSH_FILE_SYSTEM = hasattr(_libc, "syncfs")

FsyncMode = Literal["always", "files", "never"]


@dataclass(frozen=True)
class Durability:
    """``always``: a write is on disk before it is answered, flushed with ``syncfs`` where the platform
    has it; ``files``: the same promise with an fsync a file and a folder (for a file system that heavy
    writers share, whose writes each ``syncfs`` would flush too); ``never``: the OS decides."""

    mode: FsyncMode = "always"

    @property
    def flushes(self) -> bool:
        """Whether anything is flushed before a write is answered."""
        return self.mode != "never"

    @property
    def whole_file_system(self) -> bool:
        """Whether a flush of many files is one ``syncfs`` of their file system."""
        return self.mode == "always" and CAN_FLUSH_FILE_SYSTEM


DURABLE = Durability("always")
NOT_FLUSHED = Durability("never")


def fsync_dir(path: Path) -> None:
    """Flush ``path``'s folder entries (a rename is durable only once its folder is)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _syncfs(path: Path) -> None:
    """One ``syncfs(2)`` of the file system that holds ``path``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.syncfs(fd) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno), str(path))
    finally:
        os.close(fd)


class FlushGroup:
    """The ``syncfs`` calls of one file system in this process, shared (see the module's docstring)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.asked = 0  # flushes asked for so far, numbered in the order asked
        self._done = 0  # every flush asked for up to this number is on disk
        self._flushing = False
        self.flushes = 0  # syncfs calls made (what the tests and benchmarks count)

    def flush(self, path: Path) -> None:
        """Return once everything written before the call is on disk, flushed by a ``syncfs`` that
        began after the call: this thread's own, or one another thread made for it too."""
        with self._cond:
            self.asked += 1
            mine = self.asked
            while self._flushing:
                self._cond.wait()
            if self._done >= mine:
                return  # a flush that began after we asked has ended
            self._flushing = True
            covers = self.asked  # whoever asked by now had written by now
            self.flushes += 1
        flushed = False
        try:
            _syncfs(path)
            flushed = True
        finally:
            with self._cond:
                self._flushing = False
                if flushed:  # else those it covered find nothing done for them and flush themselves
                    self._done = max(self._done, covers)
                self._cond.notify_all()


_groups: dict[int, FlushGroup] = {}
_groups_guard = threading.Lock()


def flush_group(path: Path) -> FlushGroup:
    """This process's :class:`FlushGroup` for the file system that holds ``path``."""
    device = os.stat(path).st_dev
    group = _groups.get(device)
    if group is None:
        with _groups_guard:
            group = _groups.setdefault(device, FlushGroup())
    return group


def flush_file_system(path: Path) -> None:
    """Flush everything written to the file system that holds ``path``: files' contents and folders'
    entries, in one call (the kernel sends them together) rather than an fsync each, shared with this
    process's other writers on that file system (:class:`FlushGroup`)."""
    flush_group(path).flush(path)
