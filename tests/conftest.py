"""Shared fixtures and checks for the engine's tests.

``gm`` is a data home on ``tmp_path`` with fsync on (the safe default; it is cheap at test sizes) and a
:class:`~gitmem.clock.FrozenClock`; ``fast_gm`` turns fsync off for bulk tests. ``workspace`` and
``store`` build on ``gm``. :func:`assert_fsck_clean` runs the real ``git fsck --full``;
:func:`store_state` captures everything a refusal must leave alone.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitmem.catalog import Workspace
from gitmem.clock import FrozenClock
from gitmem.home import Gitmem
from gitmem.index import NoteRow, VersionRow
from gitmem.model import StoreInfo
from gitmem.repository import MAIN, loose_object_count, set_fsync
from gitmem.store import MemoryStore


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def gm(tmp_path: Path, clock: FrozenClock) -> Iterator[Gitmem]:
    yield Gitmem.open(tmp_path / "home", clock=clock, fsync=True)


@pytest.fixture
def fast_gm(tmp_path: Path, clock: FrozenClock) -> Iterator[Gitmem]:
    gm = Gitmem.open(tmp_path / "fast-home", clock=clock, fsync=False)
    yield gm
    set_fsync(True)  # fsync is process-wide in libgit2: restore the default for the next test


@pytest.fixture
def workspace(gm: Gitmem) -> Workspace:
    return gm.catalog.create_workspace("tests")


@pytest.fixture
def store_info(gm: Gitmem, workspace: Workspace) -> StoreInfo:
    return gm.create_store(workspace.id, "notes", description="engine tests")


@pytest.fixture
def store(gm: Gitmem, workspace: Workspace, store_info: StoreInfo) -> MemoryStore:
    return gm.store(workspace.id, store_info.id)


@pytest.fixture
def fast_store(fast_gm: Gitmem) -> MemoryStore:
    ws = fast_gm.catalog.create_workspace("bulk")
    info = fast_gm.create_store(ws.id, "bulk")
    return fast_gm.store(ws.id, info.id)


# -- checks -------------------------------------------------------------------------------------------


def git(repo_path: Path, *args: str) -> str:
    """Run the real ``git`` on a repository; fail the test if it fails."""
    proc = subprocess.run(["git", "-C", str(repo_path), *args], capture_output=True, text=True)
    assert proc.returncode == 0, f"git {' '.join(args)} failed: {proc.stderr}"
    return proc.stdout


def assert_fsck_clean(repo_path: Path) -> None:
    """``git fsck --full`` finds nothing wrong (dangling objects from retried writes are allowed)."""
    proc = subprocess.run(["git", "-C", str(repo_path), "fsck", "--full", "--strict", "--no-progress"],
                          capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    problems = [line for line in output.splitlines() if not line.startswith("dangling ")]
    assert proc.returncode == 0 and not problems, f"git fsck: {output}"


@dataclass(frozen=True)
class StoreState:
    """Everything a refused write must leave as it was."""

    tip: str | None
    indexed_tip: str | None
    notes: tuple[NoteRow, ...]
    versions: tuple[VersionRow, ...]
    loose_objects: int
    refs: str


def store_state(store: MemoryStore) -> StoreState:
    ref = store.repo.references.get(MAIN)
    refs = subprocess.run(["git", "-C", str(store.path), "for-each-ref"], capture_output=True, text=True).stdout
    return StoreState(str(ref.target) if ref else None, store.index.indexed_tip(),
                      tuple(store.index.all_notes()), tuple(store.index.all_versions()),
                      loose_object_count(store.path), refs)


def index_snapshot(store: MemoryStore) -> tuple[tuple[NoteRow, ...], tuple[VersionRow, ...], str | None]:
    return tuple(store.index.all_notes()), tuple(store.index.all_versions()), store.index.indexed_tip()
