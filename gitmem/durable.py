"""Making writes durable: a file's name reaches the disk only with its folder; a whole file system's
writes reach it with one ``syncfs(2)``. How far a home goes (``GITMEM_FSYNC``) is its own
:class:`Durability`, handed to what writes for it: never a switch of the process."""

from __future__ import annotations

import ctypes
import os
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
