"""Backups and restores of a whole home (gitmem.backup): consistent while writers and a retention run
are busy, incremental, erased stays erased, encrypted keys forgotten, old backups pruned."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitmem.backup.layout import KEYS, backups, read_manifest
from gitmem.backup.prune import prune_backups
from gitmem.backup.restore import MARKER, restore_home
from gitmem.backup.take import take_backup
from gitmem.clock import FrozenClock, system_clock
from gitmem.crypto.master_key import MasterKeySource
from gitmem.crypto.signing_key import known_keys
from gitmem.engine.audit.verify import verify_store
from gitmem.engine.fsck import check_home_store
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.redaction import redact, redact_conflict
from gitmem.engine.rewrite.retention import prune_all
from gitmem.errors import Conflict, PreconditionFailed
from gitmem.model import Version

OLD = dt.timedelta(days=60)


def _all_objects(repo: Path) -> bytes:
    """Every object of the repository, decompressed (loose and packed alike)."""
    return subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
    ).stdout


def _git_fsck(repo: Path) -> None:
    subprocess.run(["git", "-C", str(repo), "fsck", "--full", "--no-dangling"], capture_output=True, check=True)


def _seed_old(home: Path, ws_id: str, store_ids: list[str]) -> None:
    """Versions 60 days old in every store: retention drops most of them."""
    old = Gitmem.open(home, clock=FrozenClock(system_clock() - OLD), fsync="never")
    for store_id in store_ids:
        store = old.store(ws_id, store_id)
        for n in range(5):
            store.upsert("/old.md", f"old text {n} of {store_id}")
        store.create("/gone.md", "a note deleted long ago")
        store.delete(store.get_by_path("/gone.md").id)
    old.close()


@pytest.mark.slow
def test_backup_while_writers_and_retention_are_busy_restores_every_acknowledged_write(tmp_path: Path) -> None:
    home = tmp_path / "home"
    gm = Gitmem.open(home, fsync="never")
    ws = gm.catalog.create_workspace("team")
    store_ids = [gm.create_store(ws.id, f"s{i}").id for i in range(4)]
    _seed_old(home, ws.id, store_ids)
    acked: list[tuple[str, str, str, str]] = []  # store, memory, version, content: answered writes
    lock = threading.Lock()
    stop = threading.Event()
    warmed = [threading.Event() for _ in store_ids]
    counts = [0] * len(store_ids)
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            store = gm.store(ws.id, store_ids[i])
            n = 0
            while not stop.is_set():
                content = f"writer {i} write {n}"
                note, _ = store.upsert(f"/w/{n % 3}.md", content)
                with lock:
                    acked.append((store_ids[i], note.id, note.version_id, content))
                    counts[i] += 1
                n += 1
                if n >= 3:
                    warmed[i].set()
                stop.wait(0.01)  # paced: busy, not a flood (the suite shares two cores)
        except BaseException as exc:
            errors.append(exc)
            warmed[i].set()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(len(store_ids))]
    for t in threads:
        t.start()
    for event in warmed:
        event.wait()
    retention = threading.Thread(target=prune_all, args=(gm,))
    retention.start()
    with lock:
        before = list(acked)
        at_start = list(counts)
    report = take_backup(gm, tmp_path / "dest")
    retention.join()
    while True:  # a few more writes after the backup, so the restored home is not simply the live one
        with lock:
            if all(c >= s + 2 for c, s in zip(counts, at_start, strict=True)) or errors:
                break
        threading.Event().wait(0.01)
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(report.manifest.stores) == sorted(store_ids)

    restored = restore_home(report.folder, tmp_path / "restored")
    assert restored.ok, (restored.problems, restored.erased.problems)
    assert not (tmp_path / "restored" / MARKER).exists()
    new = Gitmem.open(tmp_path / "restored")
    dropped = {v for e in gm.catalog.erasures.since() if e.kind == "retention" for v in e.version_ids}
    assert len(dropped) == 4 * 5  # three old.md versions and both of gone.md's, in each store
    for store_id in store_ids:
        _git_fsck(new.repo_path(store_id))
        assert check_home_store(new, new.catalog.store(store_id)).ok
        live_ids = [v.id for v in _versions(gm, ws.id, store_id)]
        restored_ids = [v.id for v in _versions(new, ws.id, store_id)]
        assert restored_ids == [v for v in live_ids if v in set(restored_ids)]  # the same history, a prefix
        assert not dropped & set(restored_ids)  # dropped before or after the backup: gone either way
    for store_id, memory_id, version_id, content in before:
        version = new.store(ws.id, store_id).version(version_id)
        assert (version.memory_id, version.content) == (memory_id, content)
    new.close()
    gm.close()


def _versions(gm: Gitmem, ws_id: str, store_id: str) -> list[Version]:
    store = gm.store(ws_id, store_id)
    out: list[Version] = []
    page = None
    while True:
        got = store.versions(limit=100, page=page)
        out += got.items
        page = got.next_page
        if page is None:
            return out


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Gitmem]:
    gm = Gitmem.open(tmp_path / "home", fsync="never")
    yield gm
    gm.close()


def test_a_version_redacted_after_the_backup_is_not_in_the_restored_objects_or_index_and_a_revoked_key_stays_revoked(
    home: Gitmem, tmp_path: Path
) -> None:
    ws = home.catalog.create_workspace("team")
    info = home.create_store(ws.id, "notes")
    store = home.store(ws.id, info.id)
    store.create("/sam.md", "Sam likes tea")
    leaked = store.update(store.get_by_path("/sam.md").id, "Sam's pin is zebra-4417")
    key, _ = home.catalog.create_api_key(ws.id, "ci")
    backup = take_backup(home, tmp_path / "dest").folder
    store.update(leaked.id, "Sam likes coffee")
    redact(store, leaked.version_id, None, home.catalog.erasures)
    home.catalog.revoke(key.id)  # and a key revoked since must not work again
    assert b"zebra-4417" not in _all_objects(store.path)

    report = restore_home(backup, tmp_path / "restored")
    assert report.ok and report.erased.versions_redacted == 1
    assert report.erased.revoked == [key.id]
    new = Gitmem.open(tmp_path / "restored")
    assert new.catalog.credential(key.id).revoked_at is not None
    restored = new.store(ws.id, info.id)
    assert b"zebra-4417" not in _all_objects(restored.path)
    index_files = [p for p in (restored.path / "gitmem").iterdir() if p.name.startswith("index.sqlite3")]
    assert index_files and all(b"zebra-4417" not in p.read_bytes() for p in index_files)
    assert restored.search("zebra").items == []
    version = restored.version(leaked.version_id)
    assert version.redacted_at is not None and version.content is None
    assert restored.get_by_path("/sam.md").content == "Sam likes tea"  # back to the version before
    audit = verify_store(restored, known_keys(tmp_path / "restored"))  # a new signing key, the old one recorded
    assert audit.ok, audit.problems
    assert [e.id for e in new.catalog.erasures.since()] == [e.id for e in home.catalog.erasures.since()]
    new.close()


def test_an_incremental_backup_after_three_changed_stores_copies_three(home: Gitmem, tmp_path: Path) -> None:
    ws = home.catalog.create_workspace("team")
    infos = [home.create_store(ws.id, f"s{i}") for i in range(5)]
    for info in infos:
        home.store(ws.id, info.id).create("/a.md", f"first of {info.id}")
    first = take_backup(home, tmp_path / "dest")
    assert len(first.copied) == 5
    for info in infos[:3]:
        home.store(ws.id, info.id).upsert("/a.md", "changed")
    second = take_backup(home, tmp_path / "dest")
    assert sorted(second.copied) == sorted(i.id for i in infos[:3])
    assert sorted(second.unchanged) == sorted(i.id for i in infos[3:])
    assert second.manifest.copied_bytes == sum(second.manifest.stores[i.id].size for i in infos[:3])
    for info in infos[3:]:  # linked, not copied
        name = f"stores/{info.id}.bundle"
        assert (first.folder / name).stat().st_ino == (second.folder / name).stat().st_ino
    assert take_backup(home, tmp_path / "dest").copied == []


def test_retention_and_a_deleted_encrypted_store_after_the_backup_stay_erased(tmp_path: Path) -> None:
    key = MasterKeySource(text="a" * 43 + "=")
    home = Gitmem.open(tmp_path / "home", fsync="never", master_key=key)
    ws = home.catalog.create_workspace("team")
    info = home.create_store(ws.id, "plain")
    secret = home.create_store(ws.id, "secret", encrypted=True)
    home.store(ws.id, secret.id).create("/plan.md", "the secret plan")
    _seed_old(tmp_path / "home", ws.id, [info.id])
    first = take_backup(home, tmp_path / "dest")
    assert secret.id in json.loads((first.folder / KEYS).read_text())["owners"]
    master = (tmp_path / "home" / "master.key").read_bytes() if (tmp_path / "home" / "master.key").exists() else b""
    written = [p.read_bytes() for p in first.folder.rglob("*") if p.is_file()]
    assert not any(b"a" * 43 in data for data in written) and (not master or not any(master in d for d in written))
    prune_all(home)
    home.delete_store(ws.id, secret.id)
    second = take_backup(home, tmp_path / "dest")  # the older backup forgets the destroyed key
    for folder in (first.folder, second.folder):
        assert secret.id not in json.loads((folder / KEYS).read_text())["owners"]

    with pytest.raises(Exception, match="master key"):
        restore_home(first.folder, tmp_path / "nokey")
    report = restore_home(first.folder, tmp_path / "restored", master_key=key)
    assert report.ok and report.erased.stores_deleted == [secret.id]
    assert report.erased.versions_dropped == 5
    new = Gitmem.open(tmp_path / "restored", master_key=key)
    assert [s.id for s in new.all_stores()] == [info.id]
    assert not new.repo_path(secret.id).exists()
    assert b"old text 0" not in _all_objects(new.repo_path(info.id))
    assert new.store(ws.id, info.id).get_by_path("/old.md").content == f"old text 4 of {info.id}"
    new.close()
    home.close()


def test_restore_refuses_a_home_that_is_not_empty_and_prune_keeps_the_newest(home: Gitmem, tmp_path: Path) -> None:
    ws = home.catalog.create_workspace("team")
    home.store(ws.id, home.create_store(ws.id, "notes").id).create("/a.md", "a")
    dest = tmp_path / "dest"
    take_backup(home, dest, now=lambda: system_clock() - dt.timedelta(days=40))
    take_backup(home, dest, now=lambda: system_clock() - dt.timedelta(days=35))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "something").write_text("x")
    with pytest.raises(Conflict, match="not empty"):
        restore_home(dest, tmp_path / "full")
    assert prune_backups(dest, dt.timedelta(days=30)) == [backups(dest)[0]] or len(backups(dest)) == 1
    assert len(backups(dest)) == 1  # the newest stays, however old
    take_backup(home, dest)
    assert len(prune_backups(dest, dt.timedelta(days=30))) == 1
    assert [read_manifest(b).started_at[:4] for b in backups(dest)] == [str(system_clock().year)]


def test_a_conflict_redacted_after_the_backup_stays_redacted(home: Gitmem, tmp_path: Path) -> None:
    ws = home.catalog.create_workspace("team")
    info = home.create_store(ws.id, "notes")
    store = home.store(ws.id, info.id)
    note = store.create("/plan.md", "base")
    store.update(note.id, "the winner")
    with pytest.raises(PreconditionFailed) as refused:
        store.update(
            note.id, content="the loser's pin is otter-2291", expected_sha256=hashlib.sha256(b"base").hexdigest()
        )
    conflict_id = str(refused.value.details["conflict_id"])
    backup = take_backup(home, tmp_path / "dest").folder
    redact_conflict(store, conflict_id, ledger=home.catalog.erasures)

    report = restore_home(backup, tmp_path / "restored")
    assert report.ok and report.erased.conflicts_erased == 1
    new = Gitmem.open(tmp_path / "restored")
    restored = new.store(ws.id, info.id)
    assert restored.conflicts.get(conflict_id, with_content=False).redacted_at is not None
    assert b"otter-2291" not in _all_objects(restored.path)
    new.close()


def test_a_store_deleted_while_the_backup_ran_is_not_restored(home: Gitmem, tmp_path: Path) -> None:
    ws = home.catalog.create_workspace("team")
    kept, gone = (home.create_store(ws.id, name) for name in ("kept", "gone"))
    for info in (kept, gone):
        home.store(ws.id, info.id).create("/a.md", info.name)

    def delete_gone(store_id: str, _copy: object) -> None:
        if store_id == kept.id and gone.id in [s.id for s in home.all_stores()]:
            home.delete_store(ws.id, gone.id)  # after the catalog copy, before its bundle

    order = [s.id for s in home.all_stores()]
    assert order.index(kept.id) < order.index(gone.id)
    report = take_backup(home, tmp_path / "dest", on_store=delete_gone)
    assert report.gone == [gone.id] and gone.id not in report.manifest.stores
    restored = restore_home(report.folder, tmp_path / "restored")
    assert restored.ok
    new = Gitmem.open(tmp_path / "restored")
    assert [s.id for s in new.all_stores()] == [kept.id]
    new.close()
