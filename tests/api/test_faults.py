"""Faults a store must survive: a damaged index (it is derived, so it is set aside and rebuilt) and a
full disk (writes answer a retryable 507, nothing half-made is left, writes resume once space is free)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gitmem.api.app import create_app
from gitmem.api.settings import Settings
from gitmem.engine.fsck import check_store
from gitmem.engine.gitmem import Gitmem
from gitmem.model import StoreInfo


def _damage(index: Path, how: str) -> None:
    for sidecar in index.parent.glob(index.name + "-*"):
        sidecar.unlink()
    if how == "garbage":
        index.write_bytes(os.urandom(4096))
    else:
        data = index.read_bytes()
        index.write_bytes(data[: len(data) // 2])


def _home_with_stores(home: Path, count: int, notes: int) -> tuple[Gitmem, list[StoreInfo]]:
    gm = Gitmem.open(home, fsync="never")
    ws = gm.catalog.create_workspace("alpha")
    infos = []
    for s in range(count):
        info = gm.create_store(ws.id, f"s{s}")
        store = gm.store(ws.id, info.id)
        for i in range(notes):
            store.create(f"/n{i:03}.md", f"note {i} " + "x" * 200)
        infos.append(info)
    return gm, infos


def _index(gm: Gitmem, info: StoreInfo) -> Path:
    return gm.repo_path(info.id) / "gitmem" / "index.sqlite3"


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITMEM_")}
    env["GITMEM_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "gitmem.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("how", ["garbage", "cut in half"])
def test_a_damaged_index_is_set_aside_and_rebuilt(tmp_path: Path, how: str) -> None:
    gm, (info,) = _home_with_stores(tmp_path / "home", 1, 60)
    expected = [n.path for n in gm.store(info.workspace_id, info.id).list(limit=100, depth=0).items]
    gm._forget(info.id)
    _damage(_index(gm, info), how)

    fresh = Gitmem.open(tmp_path / "home", fsync="never")
    _, admin = fresh.catalog.create_api_key(info.workspace_id, "admin")
    with TestClient(
        create_app(fresh, Settings.defaults(dream_runner=False, prune_interval_seconds=0)), headers={"x-api-key": admin}
    ) as client:
        listed = client.get(f"/v1/memory_stores/{info.id}/memories", params={"limit": 100, "depth": 0})
        assert listed.status_code == 200, listed.text
        assert [m["path"] for m in listed.json()["data"]] == expected
        created = client.post(f"/v1/memory_stores/{info.id}/memories", json={"path": "/new.md", "content": "x"})
        assert created.status_code == 200, created.text
    aside = list(_index(gm, info).parent.glob("index.sqlite3.corrupt-*"))
    assert [p.name for p in aside if not p.name.endswith(("-wal", "-shm"))], "the damaged file is kept aside"
    # The handle that set it aside says so (fsck reports it); one opened afterwards finds it sound.
    fresh.open_store_cache.forget(info.id)
    assert check_store(fresh.store(info.workspace_id, info.id)).ok


def test_fsck_reports_a_damaged_index_and_goes_on_and_reindex_repairs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    gm, infos = _home_with_stores(home, 3, 5)
    for info in infos:
        gm._forget(info.id)
    _damage(_index(gm, infos[0]), "garbage")
    checked = _cli(home, "fsck")
    assert "Traceback" not in checked.stderr, checked.stderr
    assert checked.returncode == 1
    for info in infos:  # every store is checked, the ones after the damaged one too
        assert info.id in checked.stdout
    assert "the index was damaged" in checked.stdout
    assert _cli(home, "fsck").returncode == 0  # rebuilt: clean from now on

    _damage(_index(gm, infos[1]), "cut in half")
    repaired = _cli(home, "reindex", infos[1].id, "-w", "alpha")
    assert repaired.returncode == 0, repaired.stderr
    assert f"{infos[1].id}: 5 notes" in repaired.stdout
    assert _cli(home, "fsck").returncode == 0


def test_fsck_reports_a_store_folder_no_store_owns(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _gm, _ = _home_with_stores(home, 1, 1)
    (home / "stores" / "memstore_01M8KSAKX8VM617XSKBA200EBV.git").mkdir()
    checked = _cli(home, "fsck")
    assert checked.returncode == 1
    assert "memstore_01M8KSAKX8VM617XSKBA200EBV.git: PROBLEMS" in checked.stdout
    assert "no store in the catalog owns this folder" in checked.stdout


# -- a full disk ---------------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs: a real file system that fills up (needs root and mount; skipped otherwise)."""
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@contextlib.contextmanager
def _disk_filled(folder: Path) -> Iterator[Callable[[], None]]:
    """The disk filled, and a function that fills it again: a refused write frees what it had written
    (its temporary pack, a journal), and the next one would fit in that space."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def fill() -> None:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 512)

    try:
        fill()
        yield fill
    finally:
        os.close(fd)
        filler.unlink()


def test_a_full_disk_is_a_retryable_507_and_writes_resume(small_disk: Path) -> None:
    home = small_disk / "home"
    gm = Gitmem.open(home, fsync="never")
    ws = gm.catalog.create_workspace("alpha")
    _, admin = gm.catalog.create_api_key(ws.id, "admin")
    with TestClient(
        create_app(gm, Settings.defaults(dream_runner=False, prune_interval_seconds=0)), headers={"x-api-key": admin}
    ) as client:
        store_id = client.post("/v1/memory_stores", json={"name": "s"}).json()["id"]
        kept = client.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/kept.md", "content": "k"})
        assert kept.status_code == 200
        stores_before = sorted(p.name for p in (home / "stores").iterdir())
        with _disk_filled(small_disk) as fill:
            body = {"path": "/big.md", "content": "y" * 60_000}
            refused = client.post(f"/v1/memory_stores/{store_id}/memories", json=body)
            assert refused.status_code == 507, refused.text
            assert refused.headers["x-should-retry"] == "true"
            assert "disk is full" in refused.json()["error"]["message"]
            fill()
            tool = client.post(
                f"/v1/memory_stores/{store_id}/memory_tool",
                json={"command": "create", "path": "/memories/t.md", "file_text": "z" * 60_000},
            )
            assert tool.status_code == 200, tool.text
            assert tool.json()["is_error"] is True and "disk is full" in tool.json()["content"]
            fill()
            made = client.post("/v1/memory_stores", json={"name": "another"})
            assert made.status_code == 507, made.text
            assert sorted(p.name for p in (home / "stores").iterdir()) == stores_before  # no half-made folder
        again = client.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/big.md", "content": "y"})
        assert again.status_code == 200, again.text
        listed = client.get(f"/v1/memory_stores/{store_id}/memories", params={"depth": 0}).json()["data"]
        assert {m["path"] for m in listed} == {"/kept.md", "/big.md"}
    assert check_store(gm.store(ws.id, store_id)).ok
