"""Consistency checks: Git's own fsck, and the index against what history alone says."""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gitmem.engine.gitmem import Gitmem
from gitmem.engine.index.store_index import StoreIndex
from gitmem.engine.store.store import MemoryStore
from gitmem.git.repository import git, packers_held_off
from gitmem.model import StoreInfo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FsckReport:
    store_id: str
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_store(store: MemoryStore) -> FsckReport:
    problems: list[str] = []
    if store.index.set_aside is not None:
        problems.append(
            f"the index was damaged; it was set aside as {store.index.set_aside.name} and rebuilt from history"
        )
    with packers_held_off(store.path):
        result = git(store.path, "fsck", "--full", "--no-dangling", "--no-progress")
    if result.returncode != 0:
        problems.append("git fsck: " + result.stderr.decode(errors="replace").strip())
    store.index.catch_up()
    with tempfile.TemporaryDirectory() as tmp:
        fresh = StoreIndex(store.repo, Path(tmp) / "index.sqlite3")
        try:
            fresh.rebuild()
            problems += _compare(store.index, fresh)
        finally:
            fresh.close()
    return FsckReport(store.id, problems)


def check_home_store(gm: Gitmem, info: StoreInfo) -> FsckReport:
    """:func:`check_store` on one store of a home; a store that cannot even be opened is reported, not
    raised, so a check of every store goes on to the next."""
    try:
        with gm.leases():  # a check of every store holds one open at a time
            return check_store(gm.store(info.workspace_id, info.id))
    except Exception as exc:  # whatever broke, the report says so and fsck goes on
        log.exception("fsck of %s failed", info.id)
        return FsckReport(info.id, [f"could not be checked: {type(exc).__name__}: {exc}"])


def orphan_folders(gm: Gitmem) -> list[Path]:
    """Folders under ``stores/`` that no store in the catalog owns (e.g. left by a crash mid-create)."""
    known = {f"{info.id}.git" for info in gm.all_stores()}
    folder = gm.home / "stores"
    return sorted(p for p in folder.iterdir() if p.name not in known) if folder.is_dir() else []


def _compare(live: StoreIndex, fresh: StoreIndex) -> list[str]:
    problems = []
    live_notes, fresh_notes = list(live.all_notes()), list(fresh.all_notes())
    if live_notes != fresh_notes:
        live_set, fresh_set = set(live_notes), set(fresh_notes)
        for note in sorted(live_set - fresh_set, key=lambda n: n.path):
            problems.append(f"index has {note.path} ({note.memory_id}) that history does not")
        for note in sorted(fresh_set - live_set, key=lambda n: n.path):
            problems.append(f"history has {note.path} ({note.memory_id}) that the index does not")
    live_versions = [(v.record, v.blob_id, v.commit_id) for v in live.all_versions()]
    fresh_versions = [(v.record, v.blob_id, v.commit_id) for v in fresh.all_versions()]
    if live_versions != fresh_versions:
        problems.append(f"index versions ({len(live_versions)}) differ from history ({len(fresh_versions)})")
    return problems
