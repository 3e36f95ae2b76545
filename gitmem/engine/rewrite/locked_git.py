"""Git run by a history rewrite, as children that hold the rewrite's locks, and its crash points.

Every ``git`` a rewrite starts inherits the file descriptors of the locks this thread holds: if the
rewrite dies (SIGKILL), its locks stay held until the last child exits, so no writer resumes while an
orphaned ``git prune`` still runs. Hooks never run (``core.hooksPath=/dev/null``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from gitmem.errors import RewriteFailed
from gitmem.git import repository

if TYPE_CHECKING:
    from gitmem.engine.store.store import MemoryStore

CRASH_ENV = "GITMEM_REWRITE_CRASH_AT"  # tests only: SIGKILL ourselves at a named step
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")


_held = threading.local()


def held_fds() -> tuple[int, ...]:
    """The lock files this thread holds, for every git child to inherit."""
    return tuple(getattr(_held, "fds", ()))


@contextlib.contextmanager
def flock(path: Path, *, timeout: float, what: str) -> Iterator[None]:
    """Hold the flock on ``path`` (busy with ``what`` after ``timeout`` seconds), handed to git children."""
    busy = f"the store is busy with {what}; try again later"
    with repository.file_lock(path, timeout=timeout, busy=busy) as fd, _handed_to_children(fd):
        yield


@contextlib.contextmanager
def writer_lock(store: MemoryStore) -> Iterator[None]:
    """:func:`repository.writer_lock` (in the writers' line), its file descriptor handed to git children
    (see :func:`held_fds`); with an index on PostgreSQL, also the store's writer lock there, which holds
    across nodes (a flock on a shared volume may not)."""
    busy = "the store is busy with writes; try again later"
    with (
        repository.writer_lock(store.path, busy=busy) as fd,
        _handed_to_children(fd),
        store.index.cluster_writer_lock(),
    ):
        yield


@contextlib.contextmanager
def _handed_to_children(fd: int) -> Iterator[None]:
    fds: list[int] = _held.__dict__.setdefault("fds", [])
    fds.append(fd)
    try:
        yield
    finally:
        fds.remove(fd)


def rewrite_lock(repo_path: Path, timeout: float) -> contextlib.AbstractContextManager[None]:
    """One rewrite (or purge) at a time per store."""
    return flock(repo_path / "gitmem" / "rewrite.lock", timeout=timeout, what="a history rewrite")


def git(repo_path: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(  # noqa: S603  an argument list (no shell) of our own
        ["git", "-C", str(repo_path), *NO_HOOKS, *args],  # noqa: S607  git from PATH, an argument list (no shell)
        input=input,
        capture_output=True,
        check=False,
        pass_fds=held_fds(),
    )


def checkpoint(name: str) -> None:
    """Die here, as a power cut would, if a test asks for it (``GITMEM_REWRITE_CRASH_AT=name``)."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def git_ok(repo_path: Path, *args: str, input: bytes | None = None) -> bytes:
    result = git(repo_path, *args, input=input)
    if result.returncode != 0:
        raise RewriteFailed(f"git {args[0]} failed: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def delete_ref(repo_path: Path, ref: str) -> None:
    git(repo_path, "update-ref", "-d", ref)
