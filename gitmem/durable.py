"""Making writes durable: a file's name reaches the disk only with its folder; a whole file system's
writes reach it with one ``syncfs(2)``."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

_libc = ctypes.CDLL(None, use_errno=True)  # the os module has no syncfs
# syncfs(2) is Linux's; elsewhere writers flush file by file and folder by folder.
CAN_FLUSH_FILE_SYSTEM = hasattr(_libc, "syncfs")
_flush_file_systems = CAN_FLUSH_FILE_SYSTEM


def use_file_system_flushes(wanted: bool) -> None:
    """Whether writers that can flush a whole file system at once do (``GITMEM_FSYNC=always``) or
    flush file by file (``files``): process-wide, like libgit2's fsync switch."""
    global _flush_file_systems
    _flush_file_systems = wanted and CAN_FLUSH_FILE_SYSTEM


def flushes_file_systems() -> bool:
    return _flush_file_systems


def fsync_dir(path: Path) -> None:
    """Flush ``path``'s folder entries (a rename is durable only once its folder is)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def flush_file_system(path: Path) -> None:
    """Flush everything written to the file system that holds ``path``: files' contents and folders'
    entries, in one call (the kernel sends them together) rather than an fsync each."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.syncfs(fd) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno), str(path))
    finally:
        os.close(fd)
