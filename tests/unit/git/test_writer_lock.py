"""A store's writer lock across processes: writers take turns. A ``flock`` is per open file, so two
threads with their own descriptors contend for it exactly as two processes do."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from gitmem.engine.rewrite import locked_git
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import StoreBusy
from gitmem.git import repository

HOLD_SECONDS = 0.005  # about one batch of writes


def test_a_waiting_writer_goes_before_the_holders_next_turn(tmp_path: Path) -> None:
    """A worker whose next batch is ready as its last one ends (it asks again at once) does not keep
    the lock from another worker that was waiting: that one gets it within the turn in progress.
    Without the line, the waiter only got in if one of its tries fell into the microseconds between
    two turns (8 clients on one store of `gitmem serve --workers 2`: a write's p99 was a second)."""
    (tmp_path / "gitmem").mkdir()
    turns = 0
    stop = threading.Event()

    def busy_worker() -> None:
        nonlocal turns
        while not stop.is_set():
            with repository.writer_lock(tmp_path):
                turns += 1
                time.sleep(HOLD_SECONDS)

    worker = threading.Thread(target=busy_worker)
    worker.start()
    try:
        while turns < 3:  # it is taking turn after turn
            time.sleep(HOLD_SECONDS)
        before = turns
        with repository.writer_lock(tmp_path, timeout=10):
            waited_for = turns - before
            during = turns
            time.sleep(3 * HOLD_SECONDS)
            assert turns == during  # held: the other worker waits its turn in the line
    finally:
        stop.set()
        worker.join()
    assert waited_for <= 1


def test_a_writer_lock_held_elsewhere_is_store_busy_after_the_timeout(tmp_path: Path) -> None:
    """Waiting in the line counts against the timeout: a writer behind another waiter gives up with
    StoreBusy, as one waiting for the lock itself does; 0 tries once. The waiter then gets the lock."""
    (tmp_path / "gitmem").mkdir()
    got_it = threading.Event()

    def waiter() -> None:  # holds the line while it waits for the lock
        with repository.writer_lock(tmp_path, timeout=10):
            got_it.set()

    with repository.writer_lock(tmp_path):
        first = threading.Thread(target=waiter)
        first.start()
        while not _held(tmp_path / "gitmem" / "write.line"):
            time.sleep(HOLD_SECONDS)
        for timeout in (0, 0.1):
            with pytest.raises(StoreBusy), repository.writer_lock(tmp_path, timeout=timeout):
                pass
        assert not got_it.is_set()
    first.join()
    assert got_it.is_set()
    with repository.writer_lock(tmp_path, timeout=0):  # free again, line and lock
        pass


def test_a_rewrites_writer_lock_waits_in_the_line_and_hands_the_lock_to_git(store: MemoryStore) -> None:
    """A history rewrite takes the same lock as the writers, behind whoever holds the line, lets go of
    the line once it has the lock, and the descriptor its git children inherit is the lock's."""
    line, lock_path = store.path / "gitmem" / "write.line", store.path / "gitmem" / "write.lock"
    line.parent.mkdir(exist_ok=True)
    in_line, left = threading.Event(), threading.Event()

    def ahead_in_line() -> None:
        with repository.file_lock(line, timeout=10, busy="held"):
            in_line.set()
            time.sleep(20 * HOLD_SECONDS)
            left.set()

    ahead = threading.Thread(target=ahead_in_line)
    ahead.start()
    in_line.wait()
    with locked_git.writer_lock(store):
        assert left.is_set()  # it waited for the one ahead of it, though the lock itself was free
        assert _held(lock_path) and not _held(line)
        (fd,) = locked_git.held_fds()
        assert os.stat(fd).st_ino == lock_path.stat().st_ino
    ahead.join()
    assert locked_git.held_fds() == () and not _held(lock_path)


def _held(path: Path) -> bool:
    """Whether someone holds the flock on ``path`` (tried without waiting)."""
    try:
        with repository.file_lock(path, timeout=0, busy="held"):
            return False
    except StoreBusy:
        return True
