"""The bounded cache of open stores (gitmem/engine/open_stores.py), in one process: a real home, real
repositories and SQLite files, descriptors counted in /proc/self/fd."""

from __future__ import annotations

import gc
import os
import resource
import threading
import time
from pathlib import Path

import pytest

from gitmem.db.descriptors import low_water, open_descriptors
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.open_stores import OpenStores, capacity_for
from gitmem.engine.rewrite.rotation import rotate_store_key
from gitmem.model import StoreInfo


def open_files_under(folder: Path) -> int:
    """Descriptors of this process on files under ``folder``."""
    return len(files_open_under(folder))


def files_open_under(folder: Path) -> list[str]:
    """The files under ``folder`` this process has open (a descriptor each)."""
    found = []
    prefix = str(folder.resolve())
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix):
            found.append(target[len(prefix) :])
    return found


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("open-stores") / "home"


def fresh(home: Path, capacity: int) -> tuple[Gitmem, str]:
    gm = Gitmem.open(home, fsync="never", open_stores=capacity)
    ws = gm.catalog.workspace_by_name("w") or gm.catalog.create_workspace("w")
    return gm, ws.id


def stores_with_a_note(home: Path, prefix: str, count: int) -> tuple[Gitmem, str, list[StoreInfo]]:
    """``count`` new stores of one note each, written and closed (the home returned is closed too)."""
    gm, ws = fresh(home, 2)
    infos = [gm.create_store(ws, f"{prefix}-{i}") for i in range(count)]
    for info in infos:
        with gm.leases():
            gm.store(ws, info.id).create("/a.md", "a note")
    gm.close()
    return gm, ws, infos


def test_open_stores_stay_within_capacity_however_many_are_touched(home: Path) -> None:
    gm, ws = fresh(home, 6)
    infos = [gm.create_store(ws, f"bounded-{i}") for i in range(30)]
    for info in infos:
        with gm.leases():
            store = gm.store(ws, info.id)
            store.create("/a.md", f"note {info.id}")
            assert store.get_by_path("/a.md").content == f"note {info.id}"
        stats = gm.open_stores()
        assert stats.open_stores <= 6 and stats.in_use == 0
    stats = gm.open_stores()
    assert stats.evictions >= 24 and stats.pinned == 0
    gm.open_store_cache.drain()  # the evicted ones are closed by the sweeper's thread: now
    # A store open holds one parked connection (3 descriptors), its pack and at most one file a quiet
    # checkpoint left for SQLite to close with it; the stores closed hold nothing.
    assert open_files_under(home / "stores") <= 6 * 5
    # Every store still reads after its eviction (a cold open).
    for info in infos[:5]:
        with gm.leases():
            assert gm.store(ws, info.id).get_by_path("/a.md").content == f"note {info.id}"
    gm.close()
    assert open_files_under(home / "stores") == 0


def test_a_closed_store_leaves_no_log_and_is_small_on_disk(home: Path) -> None:
    gm, ws = fresh(home, 4)
    info = gm.create_store(ws, "at-rest")
    with gm.leases():
        store = gm.store(ws, info.id)
        for i in range(3):
            store.create(f"/n{i}.md", "a small note")
    repo = gm.repo_path(info.id)
    assert (repo / "gitmem" / "index.sqlite3-wal").exists()  # open: SQLite's log is there
    gm.open_store_cache.forget(info.id)  # what idle eviction does
    assert not (repo / "gitmem" / "index.sqlite3-wal").exists()
    assert not (repo / "gitmem" / "index.sqlite3-shm").exists()
    index_bytes = (repo / "gitmem" / "index.sqlite3").stat().st_size
    assert index_bytes <= 40 * 1024, index_bytes  # 1 KiB pages: about 24 KiB for a few notes
    gm.close()


def test_threads_that_read_a_store_give_their_connections_back(home: Path) -> None:
    gm, ws = fresh(home, 4)
    info = gm.create_store(ws, "many-threads")
    with gm.leases():
        gm.store(ws, info.id).create("/a.md", "shared")
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def read() -> None:
        try:
            with gm.leases():
                store = gm.store(ws, info.id)
                barrier.wait()  # all eight hold the store, each with a connection of its own
                assert store.get_by_path("/a.md").content == "shared"
                barrier.wait()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    # Eight threads each opened a connection (24 descriptors); once the last returned the store they
    # were closed, all of them (SQLite holds a closed one's file while another stays open), leaving
    # the one repository's pack.
    assert open_files_under(gm.repo_path(info.id)) <= 2
    gm.close()


def test_eviction_while_another_thread_uses_the_store(home: Path) -> None:
    gm, ws = fresh(home, 4)
    info = gm.create_store(ws, "held")
    others = [gm.create_store(ws, f"filler-{i}") for i in range(8)]
    with gm.leases():
        gm.store(ws, info.id).create("/a.md", "still here")
    holding, evicted = threading.Event(), threading.Event()
    seen: list[str] = []

    def hold() -> None:
        with gm.leases():
            store = gm.store(ws, info.id)
            assert store.get_by_path("/a.md").content == "still here"
            holding.set()
            evicted.wait(10)
            # Evicted meanwhile: the handle stays open for its user, and answers.
            seen.append(store.get_by_path("/a.md").content or "")
            seen.append(store.create("/b.md", "written after").path)

    t = threading.Thread(target=hold)
    t.start()
    assert holding.wait(10)
    gm.open_store_cache.forget(info.id)
    for other in others:  # and the LRU overflows past it
        with gm.leases():
            gm.store(ws, other.id).list()
    assert open_files_under(gm.repo_path(info.id)) > 0  # not closed under its user
    with gm.leases():  # another request gets a fresh handle meanwhile
        assert gm.store(ws, info.id).get_by_path("/a.md").content == "still here"
    gm.open_store_cache.forget(info.id)
    evicted.set()
    t.join()
    assert seen == ["still here", "/b.md"]
    # The last user returned it: closed, nothing of it left open.
    assert open_files_under(gm.repo_path(info.id)) == 0
    assert gm.open_stores().open_stores <= 4
    gm.close()


def test_an_encrypted_store_evicted_and_reopened_reads_and_takes_a_rotated_key(home: Path) -> None:
    gm, ws = fresh(home, 4)
    info = gm.create_store(ws, "secret", encrypted=True)
    with gm.leases():
        gm.store(ws, info.id).create("/k.md", "under the first key")
    first = gm.keyring.current(info.id).key_id
    gm.open_store_cache.forget(info.id)
    assert open_files_under(gm.repo_path(info.id)) == 0
    with gm.leases():
        store = gm.store(ws, info.id)
        assert store.get_by_path("/k.md").content == "under the first key"
        assert store.codec.key_id == first  # type: ignore[attr-defined]
    rotate_store_key(gm, info.id)
    second = gm.keyring.current(info.id).key_id
    assert second != first
    with gm.leases():  # the cached handle had the old key: replaced on checkout, not reused
        store = gm.store(ws, info.id)
        assert store.codec.key_id == second  # type: ignore[attr-defined]
        store.create("/k2.md", "under the second key")
        assert store.get_by_path("/k.md").content == "under the first key"
    gm.open_store_cache.forget(info.id)
    with gm.leases():
        assert gm.store(ws, info.id).get_by_path("/k2.md").content == "under the second key"
    assert gm.open_stores().open_stores <= 4
    gm.close()
    gc.collect()  # the rotation's own repositories (a pygit2 repository is in a reference cycle)
    assert open_files_under(gm.repo_path(info.id)) == 0


def test_idle_stores_are_closed_by_the_sweep(home: Path) -> None:
    gm, ws = fresh(home, 8)
    gm.open_store_cache.idle_seconds = 0.0
    info = gm.create_store(ws, "idle")
    with gm.leases():
        gm.store(ws, info.id).create("/a.md", "x")
    assert gm.open_store_cache.sweep() >= 1
    assert open_files_under(gm.repo_path(info.id)) == 0
    assert gm.open_stores().idle_closes >= 1
    gm.close()


def test_a_store_taken_outside_a_scope_is_never_closed_under_its_holder(home: Path) -> None:
    gm, ws = fresh(home, 2)
    pinned = gm.create_store(ws, "pinned")
    store = gm.store(ws, pinned.id)  # the library used directly: no scope
    store.create("/a.md", "kept")
    for i in range(5):
        info = gm.create_store(ws, f"churn-{i}")
        with gm.leases():
            gm.store(ws, info.id).list()
    assert store.get_by_path("/a.md").content == "kept"
    assert gm.open_stores().pinned == 1
    gm.close()


def test_capacity_follows_the_open_file_limit() -> None:
    assert capacity_for(1024) < capacity_for(4096) <= capacity_for(None)
    assert capacity_for(256) >= 8
    # The capacity plus its reserve fits under the limit.
    for limit in (256, 1024, 4096):
        assert capacity_for(limit) * 8 < limit
    assert OpenStores().capacity == capacity_for(OpenStores().limit)


def test_paging_through_the_stores_opens_none_of_them(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gitmem.git.pack import policy

    # Stores quiet for 2 s are consolidated by this process's quiet watcher, which opens their packs:
    # a busy machine took longer than that to make them (a failure under make test). Not what is tested.
    monkeypatch.setattr(policy, "QUIET_SECONDS", 3600.0)
    gm = Gitmem.open(home, fsync="never", open_stores=4)
    ws = gm.catalog.create_workspace("listing").id
    made = {gm.create_store(ws, f"listed-{i}").id for i in range(250)}
    gm.open_store_cache.drain()  # the stores evicted as the next ones came, closed now by the sweeper
    assert files_open_under(home / "stores") == []
    seen: list[str] = []
    page = None
    while True:
        listed = gm.list_stores(ws, limit=100, page=page)
        seen += [info.id for info in listed.items]
        page = listed.next_page
        if page is None:
            break
    assert set(seen) == made and len(seen) == 250
    assert gm.open_stores().open_stores == 0
    assert files_open_under(home / "stores") == []  # no repository, no index opened
    gm.close()


def test_closed_stores_leave_nothing_of_themselves_in_the_process(home: Path) -> None:
    """What the process keeps of a store beside its handle (its group committer, its index's write
    lock, its page tokens' codec) goes with the handle, and the rest is bounded: 10,000 stores touched
    kept ~6 KB each before (issue 27)."""
    from gitmem.db import page_tokens, thread_connections
    from gitmem.engine.store import group_commit
    from gitmem.git.pack import packing, policy

    gm, _, infos = stores_with_a_note(home, "leaves-nothing", 10)
    ids = [info.id for info in infos]

    def kept(table: object) -> list[str]:
        return [str(key) for key in list(table) if any(i in str(key) for i in ids)]  # type: ignore[call-overload]

    # The quiet watcher holds a written store's index until it has gone quiet (then checkpoints it).
    deadline = time.monotonic() + 60
    while kept(policy._watcher.when_quiet) or kept(policy._watcher.last_write):
        assert time.monotonic() < deadline, "the stores never went quiet"
        time.sleep(0.05)
    for info in infos:
        packing.wait_for_background_packer(gm.repo_path(info.id))
    gc.collect()
    assert kept(group_commit._committers) == []
    assert kept(thread_connections._write_locks) == []
    assert kept(page_tokens._cache) == []
    assert len(policy._policies) <= policy.POLICIES_KEPT


def test_cold_opens_make_room_before_descriptors_run_out(home: Path) -> None:
    """Free descriptors are counted only every so often (listing /proc/self/fd is not free), yet often
    enough that cold opens close idle stores before an open fails for want of one."""
    _, ws, infos = stores_with_a_note(home, "room", 40)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    used = open_descriptors()
    assert used is not None  # /proc is there
    limit = used + 80
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        gm = Gitmem.open(home, fsync="never", open_stores=200)  # capacity alone would hold all 40
        peak = 0
        for info in infos:
            with gm.leases():
                assert gm.store(ws, info.id).get_by_path("/a.md").content == "a note"
            peak = max(peak, open_descriptors() or 0)
        stats = gm.open_stores()
        gm.close()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert stats.evictions > 0 and stats.open_stores < 40
    # Room was made before the descriptors ran out (without it, the peak is the limit less one or two:
    # an open failed and was retried), not after.
    assert peak <= limit - low_water(limit) // 2, (peak, limit)
