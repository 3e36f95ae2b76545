"""Group commit: writes that meet at a store go in one batch (one pack, one move of ``main``), each
its own commit; a write that fails its own checks fails alone and the others land."""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gitmem import durable
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.fsck import check_store
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.group_commit import committer_for
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import GitmemError, PathConflict, PreconditionFailed
from gitmem.git import repository
from gitmem.git.commits import parse_message
from gitmem.git.pack import packing as maintenance
from gitmem.git.pack import policy
from tests.checks import assert_fsck_clean, commit, index_snapshot


@pytest.fixture(autouse=True)
def no_background_packing(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests count and read the packs that batches write: no packer may roll them up meanwhile."""
    monkeypatch.setattr(policy, "after_write", lambda *args, **kwargs: None)


def packs(store: MemoryStore) -> set[str]:
    return {p.name for p in (store.path / "objects" / "pack").glob("pack-*.pack")}


def loose_objects(store: MemoryStore) -> int:
    return maintenance.loose_objects(store.path).count


class Writers:
    """Writes started one by one, each queued behind a batch that waits for the writer lock."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.results: dict[str, object] = {}
        self.threads: list[threading.Thread] = []

    def start(self, name: str, write: Callable[[], object], *, queued: int | None) -> None:
        def run() -> None:
            try:
                self.results[name] = write()
            except GitmemError as exc:
                self.results[name] = exc

        thread = threading.Thread(target=run)
        thread.start()
        self.threads.append(thread)
        if queued is not None:  # wait until the write is in the queue (or leading), in this order
            committer = committer_for(self.store.path)
            deadline = time.monotonic() + 10
            while len(committer._queue) < queued:
                assert time.monotonic() < deadline, "a write never reached the queue"
                time.sleep(0.001)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=60)


def test_a_batch_lands_every_write_but_the_one_that_fails_its_checks(store: MemoryStore) -> None:
    note = store.create("/counter.md", "v1")
    v1 = hashlib.sha256(b"v1").hexdigest()
    before = packs(store)
    writers = Writers(store)
    with repository.writer_lock(store.path):  # the first batch's leader waits here; the rest queue up
        writers.start("lead", lambda: store.create("/lead.md", "first"), queued=0)
        time.sleep(0.05)
        writers.start("b", lambda: store.update(note.id, content="v2", expected_sha256=v1), queued=1)
        writers.start("c", lambda: store.update(note.id, content="v3", expected_sha256=v1), queued=2)
        writers.start("d", lambda: store.create("/d.md", "dee"), queued=3)
        writers.start("e", lambda: store.create("/d.md/e.md", "under a note made earlier in the batch"), queued=4)
        writers.start("f", lambda: store.delete(note.id), queued=5)
    writers.join()

    results = writers.results
    assert isinstance(results["c"], PreconditionFailed)  # planned against the batch's earlier write b
    assert isinstance(results["e"], PathConflict)
    assert {name for name, r in results.items() if isinstance(r, Exception)} == {"c", "e"}
    # The leader's own batch, then b..f in one, and c's conflict (kept once the batch is over).
    assert len(packs(store) - before) == 3 and len(store.conflicts.of_note(note.id)) == 1
    assert loose_objects(store) == 0

    # The history is what one-at-a-time writing makes: one commit per landed write, in order.
    log = subprocess.run(
        ["git", "-C", str(store.path), "log", "--format=%H", "main"], capture_output=True, text=True, check=True
    ).stdout.split()
    messages = [parse_message(commit(store.repo[c]).message) for c in log[:4]][::-1]
    assert [[(r.operation, r.path) for r in m] for m in messages] == [
        [("created", "/lead.md")],
        [("modified", "/counter.md")],
        [("created", "/d.md")],
        [("deleted", "/counter.md")],
    ]
    assert [v.operation for v in store.versions(memory_id=note.id).items] == ["deleted", "modified", "created"]
    assert store.get_by_path("/d.md").content == "dee"
    assert results["b"].content_sha256 == hashlib.sha256(b"v2").hexdigest()  # type: ignore[attr-defined]
    assert results["d"] == store.get_by_path("/d.md", with_content=False)  # the answer is what was indexed

    incremental = index_snapshot(store)
    store.index.rebuild()
    assert index_snapshot(store) == incremental
    assert_fsck_clean(store.path)
    assert check_store(store).ok
    for pack in packs(store) - before:
        idx = store.path / "objects" / "pack" / pack.replace(".pack", ".idx")
        verify = subprocess.run(["git", "verify-pack", str(idx)], capture_output=True, text=True)
        assert verify.returncode == 0, verify.stderr


def test_a_landed_write_is_answered_even_if_the_index_cannot_follow(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once main has moved the write succeeded: an index failure after that is no error for the
    caller, and the next request catches the index up."""
    from gitmem.engine.index.store_index import StoreIndex

    def broken(self: StoreIndex, tip_hex: str | None) -> None:  # noqa: ARG001  stands in for StoreIndex.set_tip
        raise OSError("disk full")

    monkeypatch.setattr(StoreIndex, "set_tip", broken)
    note = store.create("/landed.md", "it is on main")
    monkeypatch.undo()
    assert store.get(note.id).content == "it is on main"
    assert store.get(note.id, with_content=False) == note
    incremental = index_snapshot(store)
    store.index.rebuild()
    assert index_snapshot(store) == incremental


def test_writes_to_other_stores_do_not_wait(gm, workspace) -> None:  # type: ignore[no-untyped-def]
    """A store whose writer lock is held (a long batch) does not hold up writes to another store."""
    first = gm.store(workspace.id, gm.create_store(workspace.id, "first").id)
    second = gm.store(workspace.id, gm.create_store(workspace.id, "second").id)
    writers = Writers(first)
    with repository.writer_lock(first.path):
        writers.start("stuck", lambda: first.create("/waits.md", "for the lock"), queued=0)
        assert second.create("/free.md", "not waiting").path == "/free.md"
        assert "stuck" not in writers.results
    writers.join()
    assert first.get_by_path("/waits.md").content == "for the lock"


@pytest.mark.skipif(not durable.CAN_FLUSH_FILE_SYSTEM, reason="syncfs(2) is Linux's")
def test_batches_of_many_stores_share_flushes_yet_none_is_answered_before_its_own_commit_is_flushed(
    gm: Gitmem, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight writers on eight stores: their batches' flushes ride the same ``syncfs`` calls (fewer calls
    than flushes asked for), and every write is answered only after a ``syncfs`` that began once its
    commit was on ``main`` has ended."""
    stores = [gm.store(workspace.id, gm.create_store(workspace.id, f"s{k}").id) for k in range(8)]
    for s in stores:
        s.create("/first.md", "opened")
    group = durable.flush_group(stores[0].path)
    asked_before, flushes_before = group.asked, group.flushes
    flushed_tips: dict[Path, set[str]] = {s.path: set() for s in stores}  # each store's tips known on disk
    guard = threading.Lock()
    first_call = threading.Event()
    real_syncfs = durable._syncfs

    def watched(path: Path) -> None:
        if not first_call.is_set():  # hold the first flush until every store's batch has asked for one
            first_call.set()
            deadline = time.monotonic() + 10
            while group.asked < asked_before + len(stores) and time.monotonic() < deadline:
                time.sleep(0.001)
        # What this flush makes durable: everything written before it began, these tips included.
        began_with = {s.path: (s.path / repository.MAIN).read_text().strip() for s in stores}
        real_syncfs(path)
        with guard:
            for store_path, tip in began_with.items():
                flushed_tips[store_path].add(tip)

    monkeypatch.setattr(durable, "_syncfs", watched)
    answered: list[tuple[MemoryStore, str, set[str]]] = []  # a write, its commit, the tips on disk then

    def write(store: MemoryStore) -> None:
        for n in range(4):
            note = store.create(f"/n{n}.md", f"note {n}")
            with guard:
                on_disk = set(flushed_tips[store.path])
            answered.append((store, store.version(note.version_id).commit_id, on_disk))

    threads = [threading.Thread(target=write, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(answered) == 32
    asked, flushes = group.asked - asked_before, group.flushes - flushes_before
    assert flushes < asked, f"{flushes} syncfs calls for {asked} flushes asked for: none shared"
    for store, commit_id, on_disk in answered:
        repo = store.repo
        assert any(tip == commit_id or repo.descendant_of(tip, commit_id) for tip in on_disk), (
            f"{commit_id} was answered before a flush that began after it had ended"
        )


def test_a_flush_that_fails_is_not_counted_for_those_who_waited_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer waiting on another's ``syncfs`` that fails flushes for itself: it is not told its writes
    are on disk."""
    group = durable.FlushGroup()
    calls: list[str] = []
    waiting = threading.Event()

    real_syncfs = durable._syncfs

    def syncfs(path: Path) -> None:
        if path != tmp_path:  # another test's store the quiet watcher packs meanwhile: not counted here
            real_syncfs(path)
            return
        calls.append(threading.current_thread().name)
        if len(calls) == 1:
            deadline = time.monotonic() + 10
            while group.asked < 2 and time.monotonic() < deadline:  # the second writer is waiting on it
                time.sleep(0.001)
            waiting.set()
            raise OSError(5, "Input/output error")

    monkeypatch.setattr(durable, "_syncfs", syncfs)
    failed: list[BaseException] = []

    def first() -> None:
        try:
            group.flush(tmp_path)
        except OSError as exc:
            failed.append(exc)

    leader = threading.Thread(target=first, name="first")
    leader.start()
    while not calls:
        time.sleep(0.001)
    second = threading.Thread(target=group.flush, args=(tmp_path,), name="second")
    second.start()
    leader.join(timeout=30)
    second.join(timeout=30)
    assert waiting.is_set() and len(failed) == 1
    assert calls == ["first", "second"]  # the second made its own flush after the first one failed


@pytest.mark.skipif(not durable.CAN_FLUSH_FILE_SYSTEM, reason="syncfs(2) is Linux's")
def test_a_batch_is_flushed_once_before_its_files_are_named_and_once_after_main_moved(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The quiet watcher packs a store quiet for 2 s into one, flushing too: a busy machine took that
    # long between the two writes (a third flush, a failure under make test). Not what is counted.
    monkeypatch.setattr(policy, "QUIET_SECONDS", 3600.0)
    before = store.create("/a.md", "a")
    # At each flush: main, the packs, main's lock file there, how many temporary pack files there are.
    seen: list[tuple[str | None, set[str], bool, int]] = []
    flush = durable.flush_file_system

    def watched(path: Path) -> None:
        tip = repository.read_tip(store.repo)
        lock = (store.path / f"{repository.MAIN}.lock").exists()
        temporary = len(list((store.path / "objects" / "pack").glob("tmp_pack_*")))
        seen.append((str(tip) if tip else None, packs(store), lock, temporary))
        flush(path)

    monkeypatch.setattr(durable, "flush_file_system", watched)
    packs_before = packs(store)
    store.create("/b.md", "b")
    (new_pack,) = packs(store) - packs_before
    tip_before = next(v.commit_id for v in store.versions(memory_id=before.id).items)
    main_after = str(repository.read_tip(store.repo))
    assert seen == [
        (tip_before, packs_before, True, 2),  # the pack and its index written, not named; main's lock written
        (main_after, packs_before | {new_pack}, False, 0),  # then both named and main moved: their names
    ]


def test_with_fsync_files_a_batch_is_flushed_file_by_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``GITMEM_FSYNC=files``, and every platform without syncfs(2)."""
    gm = Gitmem.open(tmp_path / "home", fsync="files")
    workspace = gm.catalog.create_workspace("w")
    store = gm.store(workspace.id, gm.create_store(workspace.id, "s").id)
    assert store.durability.flushes and not store.durability.whole_file_system
    # Only this home's flushes count: the process's packer may flush another test's store meanwhile.
    flushed: list[int] = []
    syncfs, fsync = durable.flush_file_system, os.fsync

    def no_syncfs(path: Path) -> None:
        if path.is_relative_to(tmp_path):
            pytest.fail("syncfs called")
        syncfs(path)

    def counted_fsync(fd: int) -> None:
        if Path(os.readlink(f"/proc/self/fd/{fd}")).is_relative_to(tmp_path):
            flushed.append(fd)
        else:
            fsync(fd)

    monkeypatch.setattr(durable, "flush_file_system", no_syncfs)
    monkeypatch.setattr(os, "fsync", counted_fsync)
    note = store.create("/a.md", "a")
    assert len(flushed) == 5  # the pack, its index, main's lock file, and their two folders
    assert store.get(note.id).content == "a"
    assert_fsck_clean(store.path)
    store.close()
    gm.close()


def test_the_pack_of_a_batch_is_valid_for_stock_git(store: MemoryStore, tmp_path: Path) -> None:
    for i in range(5):
        store.create(f"/f{i % 2}/n{i}.md", f"note {i}")
    store.update(store.get_by_path("/f0/n0.md").id, path="/f1/moved.md")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(store.path), str(clone)], check=True)
    assert sorted(p.relative_to(clone).as_posix() for p in clone.rglob("*.md")) == [
        "f0/n2.md",
        "f0/n4.md",
        "f1/moved.md",
        "f1/n1.md",
        "f1/n3.md",
    ]
    assert (clone / "f1" / "moved.md").read_text() == "note 0"
    assert_fsck_clean(store.path)


def test_a_batch_into_a_big_folder_stores_its_versions_as_deltas(fast_store: MemoryStore) -> None:
    store = fast_store
    for i in range(40):
        store.create(f"/notes/a-rather-long-note-name-{i:03d}.md", f"{i}")
    before = packs(store)
    writers = Writers(store)
    with repository.writer_lock(store.path):
        writers.start("lead", lambda: store.create("/elsewhere.md", "x"), queued=0)
        time.sleep(0.05)
        for n in range(4):
            writers.start(f"w{n}", functools.partial(store.create, f"/notes/batched-{n}.md", f"b{n}"), queued=n + 1)
    writers.join()
    assert not [r for r in writers.results.values() if isinstance(r, Exception)]
    folder = store.path / "objects" / "pack"
    _lead_pack, batch_pack = sorted(packs(store) - before, key=lambda p: (folder / p).stat().st_size)
    verify = subprocess.run(
        ["git", "verify-pack", "-v", str(folder / batch_pack)], capture_output=True, text=True, check=True
    ).stdout
    assert "chain length = 3" in verify  # the folder's 2nd, 3rd and 4th versions of the batch are deltas
    assert [store.get_by_path(f"/notes/batched-{n}.md").content for n in range(4)] == ["b0", "b1", "b2", "b3"]
    assert_fsck_clean(store.path)
    assert check_store(store).ok
