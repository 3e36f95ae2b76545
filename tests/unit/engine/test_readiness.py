"""The readiness checks (gitmem/engine/readiness.py) on a real SQLite catalog and a real, small tmpfs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitmem.db import SQLiteDatabase
from gitmem.engine.readiness import ReadinessProbe

MIB = 1 << 20


def test_ready_then_not_as_the_disk_fills_then_ready_again(small_disk: Path) -> None:
    probe = ReadinessProbe(SQLiteDatabase(small_disk / "catalog.sqlite3"), small_disk, min_free_bytes=1 * MIB)
    assert probe.check().ready
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize - MIB // 2))
    state = probe.check()
    assert [c.name for c in state.failing] == ["disk"]
    assert "under the 1048576 required" in state.failing[0].reason and str(small_disk) not in state.failing[0].reason
    filler.unlink()
    assert probe.check().ready
    probe.close()


def test_a_full_disk_refuses_the_probe_write(small_disk: Path) -> None:
    probe = ReadinessProbe(SQLiteDatabase(small_disk / "catalog.sqlite3"), small_disk, min_free_bytes=0)
    with open(small_disk / "filler", "wb") as out, pytest.raises(OSError, match="No space left"):  # noqa: PT012  writes until the disk is full
        while True:
            out.write(b"\0" * 65536)
            out.flush()
    state = probe.check()
    assert "home" in [c.name for c in state.failing]
    probe.close()
