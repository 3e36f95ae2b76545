"""A store's writer lock across processes: writers take turns. A ``flock`` is per open file, so two
threads with their own descriptors contend for it exactly as two processes do."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

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
    """Waiting in the line counts against the timeout; 0 tries once."""
    (tmp_path / "gitmem").mkdir()
    with repository.writer_lock(tmp_path):
        for timeout in (0, 0.1):
            with pytest.raises(StoreBusy), repository.writer_lock(tmp_path, timeout=timeout):
                pass
    with repository.writer_lock(tmp_path, timeout=0):  # free again, line and lock
        pass
