"""The background packing policy (gitmem.git.pack.policy, with gitmem.git.pack.packing): disk stays
near the packed size while a big folder is written, a quiet store is consolidated into one pack with
deltas, a packer racing writers loses no object, a packer that runs out of disk leaves no temporary
pack behind, and one that finds a pack a killed writer left without its index packs all the same."""

from __future__ import annotations

import os
import resource
import secrets
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.flat import seed_notes
from bench.stores import disk_of
from gitmem.durable import NOT_FLUSHED
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store import store as store_module
from gitmem.engine.store.store import MemoryStore
from gitmem.git import repository
from gitmem.git.pack import packing, policy, small
from gitmem.git.pack.format import PackObject, write_pack
from gitmem.git.trees import object_id
from tests.checks import assert_fsck_clean, git


def packs(repo_path: Path) -> list[Path]:
    return sorted((repo_path / "objects" / "pack").glob("pack-*.pack"))


def temporary_packs(repo_path: Path) -> list[str]:
    return sorted(p.name for p in (repo_path / "objects" / "pack").iterdir() if "tmp" in p.name)


def wait_for_consolidation(asked: list[bool], count: int = 1, timeout: float = 60.0) -> None:
    """Until the quiet watcher has asked for ``count`` full packs (run at once by ``quick_policy``)."""
    deadline = time.monotonic() + timeout
    while asked.count(True) < count:
        assert time.monotonic() < deadline, "the store was never consolidated"
        time.sleep(0.05)


@pytest.fixture
def quick_policy(monkeypatch: pytest.MonkeyPatch, fast_store: MemoryStore) -> list[bool]:
    """The policy's limits scaled down to test sizes, and its packs run at once (not in a
    background thread), so what is on disk after each write does not depend on timing. Yields the packs made
    (True for a full one)."""
    monkeypatch.setattr(policy, "UNPACKED_BYTES_LIMIT", 256 << 10)
    monkeypatch.setattr(policy, "QUIET_SECONDS", 0.3)
    monkeypatch.setattr(packing, "CONSOLIDATE_MIN_BYTES", 32 << 10)
    asked: list[bool] = []

    def pack_now(
        repo_path: Path,
        mode: packing.PackMode = "geometric",
        *,
        fsync: bool = True,
        always: bool = False,  # noqa: ARG001  packs now whatever the cap
    ) -> None:
        # A pack asked for while another holds the lock (the quiet watcher's, while a write's own runs
        # here in the writer's thread, where it cannot wait for it) runs once the other is done.
        while not packing.pack(repo_path, mode, fsync=fsync):
            time.sleep(0.01)
        if repo_path.resolve() == fast_store.path.resolve():  # the quiet watcher serves every store of the process
            asked.append(mode == "full")

    monkeypatch.setattr(packing, "pack_in_background", pack_now)
    return asked


def test_a_big_folder_stays_near_its_packed_size(fast_store: MemoryStore, quick_policy: list[bool]) -> None:
    seed_notes(fast_store.path, {f"/notes/n-{i:04d}.md": f"note {i}" for i in range(2000)})
    packing.pack(fast_store.path, "full")
    peak, per_write = 0, 0
    for i in range(60):
        before = packing.objects_bytes(fast_store.path)
        fast_store.create(f"/notes/new-{i:03d}.md", f"new note {i}")
        per_write = max(per_write, packing.objects_bytes(fast_store.path) - before)
        peak = max(peak, packing.written_since_pack(fast_store.path))
    # A write leaves a whole copy of the folder's tree (~50 KB, loose or in a batch's pack): packed
    # every few writes, not every 256; and what waits to be packed stays near the limit.
    assert quick_policy.count(False) >= 2
    assert peak <= policy.UNPACKED_BYTES_LIMIT + per_write
    wait_for_consolidation(quick_policy)  # when quiet
    assert len(packs(fast_store.path)) == 1 and packing.loose_objects(fast_store.path).count == 0
    consolidated = packing.objects_bytes(fast_store.path)
    # Stock git's best effort on the same objects: every delta searched again.
    git(fast_store.path, "repack", "-a", "-d", "-f", "-q", "--depth=4095", "--window=10")
    assert consolidated <= 1.25 * packing.objects_bytes(fast_store.path)
    assert_fsck_clean(fast_store.path)


def test_a_lone_write_to_a_quiet_store_does_not_repack_it(fast_store: MemoryStore, quick_policy: list[bool]) -> None:
    for name in ("a", "b"):  # past the consolidation minimum, in more than one pack or loose
        fast_store.create(f"/{name}.md", secrets.token_hex(15_000))
    wait_for_consolidation(quick_policy)
    assert quick_policy == [True]
    note = fast_store.create("/c.md", "a small note")
    time.sleep(policy.QUIET_SECONDS * 4)
    assert quick_policy == [True]  # too little grew to be worth a repack
    assert fast_store.get(note.id).content == "a small note"


def object_ids(repo_path: Path) -> set[str]:
    repo = repository.open_repository(repo_path)
    try:
        return {str(oid) for oid in repo.odb}
    finally:
        repo.free()  # its packs closed now, not at the next collection


def test_a_small_store_is_consolidated_in_this_process_with_every_object(
    fast_gm: Gitmem, fast_store: MemoryStore
) -> None:
    """A few small notes in packs and a loose object become one pack without git (a process a store was
    7 ms, and one thread behind 10,000 stores' writers left them in two packs for minutes)."""
    fast_store.create("/a.md", "a note")
    fast_store.create("/b.md", "another")
    repo = repository.open_repository(fast_store.path)
    repo.create_blob(b"not referenced yet")  # loose
    repo.free()
    before = object_ids(fast_store.path)
    assert not small.consolidate(fast_store.path, fsync=True)  # an unreachable object: git's (a cruft pack)
    assert object_ids(fast_store.path) == before and packing.loose_objects(fast_store.path).count == 1
    fast_store.create("/c.md", "not referenced yet")  # the loose blob is now the note's
    before = object_ids(fast_store.path)
    assert len(packs(fast_store.path)) >= 2
    keep = packs(fast_store.path)[0].with_suffix(".keep")
    keep.touch()  # a push's pack whose refs are not updated yet: git's
    assert not small.consolidate(fast_store.path, fsync=True) and len(packs(fast_store.path)) >= 2
    keep.unlink()
    fast_gm.close()  # nothing of the store open: what is open after is the packer's
    opened = len(os.listdir("/proc/self/fd"))
    assert small.consolidate(fast_store.path, fsync=True)
    assert len(os.listdir("/proc/self/fd")) == opened  # its packs given back without a collection
    assert len(packs(fast_store.path)) == 1 and packing.loose_objects(fast_store.path).count == 0
    assert object_ids(fast_store.path) == before
    assert not list((fast_store.path / "objects" / "pack").glob("*.mtimes"))  # no cruft pack: git never ran
    assert_fsck_clean(fast_store.path)
    assert git(fast_store.path, "cat-file", "blob", "main:c.md") == "not referenced yet"


@pytest.mark.usefixtures("quick_policy")
def test_a_quiet_store_keeps_no_index_log(fast_store: MemoryStore) -> None:
    """While written, the index's write-ahead log holds the last commits; once the store has gone
    quiet it is copied into the index and cut to nothing."""
    wal = fast_store.index.path.with_name(fast_store.index.path.name + "-wal")
    for i in range(40):
        fast_store.create(f"/log/{i}.md", f"note {i} " * 40)
    assert wal.stat().st_size > 0
    deadline = time.monotonic() + 30
    while wal.exists() and wal.stat().st_size > 0:
        assert time.monotonic() < deadline, "the log was never emptied"
        time.sleep(0.05)
    assert fast_store.get_by_path("/log/39.md").content == "note 39 " * 40  # the index still answers


def test_many_small_packs_are_rolled_up(fast_store: MemoryStore, quick_policy: list[bool]) -> None:
    """What a pack for every batch of writes leaves: small packs, rolled up geometrically."""
    for i in range(policy.MAX_PACKS + 2):
        seed_notes(fast_store.path, {f"/batch/{i}.md": f"batch {i}"})
        git(fast_store.path, "-c", "core.hooksPath=/dev/null", "repack", "-d", "-q")  # a pack of its own
    assert len(packs(fast_store.path)) > policy.MAX_PACKS
    fast_store.create("/after.md", "one more write")
    assert quick_policy[:1] == [False]
    assert len(packs(fast_store.path)) <= 4
    assert fast_store.get_by_path("/batch/0.md").content == "batch 0"


def test_packers_racing_writers_lose_no_object(fast_store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "PACK_EVERY_WRITES", 3)  # background packs all the time, too
    stop = threading.Event()
    failures: list[BaseException] = []

    def pack_forever() -> None:
        try:
            while not stop.is_set():
                packing.pack(fast_store.path, "full")
                packing.pack(fast_store.path)
        except BaseException as exc:  # reported by the test
            failures.append(exc)

    packer = threading.Thread(target=pack_forever)
    packer.start()
    try:
        notes = {fast_store.create(f"/race/{i % 4}/n{i}.md", f"note {i}").id: f"note {i}" for i in range(120)}
    finally:
        stop.set()
        packer.join()
    packing.wait_for_background_packer(fast_store.path)
    assert not failures
    assert_fsck_clean(fast_store.path)
    for memory_id, content in notes.items():
        assert fast_store.get(memory_id).content == content


def test_a_packer_out_of_disk_leaves_no_temporary_pack(fast_store: MemoryStore) -> None:
    seed_notes(fast_store.path, {f"/n/{i}.md": secrets.token_hex(200) for i in range(300)})
    notes = [n.path for n in fast_store.list("/", limit=1000).items]
    tip = repository.read_tip(fast_store.repo)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 10, hard))  # the disk is full after 16 KiB, for git
    try:
        with pytest.raises(subprocess.CalledProcessError):
            packing.pack(fast_store.path, "full")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert temporary_packs(fast_store.path) == []
    assert repository.read_tip(fast_store.repo) == tip
    assert_fsck_clean(fast_store.path)
    assert packing.pack(fast_store.path, "full")  # with room again, packing works
    assert len(packs(fast_store.path)) == 1 and temporary_packs(fast_store.path) == []
    assert len(notes) == 300 and all(fast_store.get_by_path(p).content is not None for p in notes)


def test_a_pack_left_without_its_index_does_not_stop_a_full_pack(fast_store: MemoryStore) -> None:
    """A writer renames its pack into place, then the pack's index: killed between the two, it leaves a
    pack git does not read but ``git repack --cruft`` lists ("could not find pack", test_crash's flake)."""
    note = fast_store.create("/a.md", "kept")
    body = b"a batch whose writer was killed before its index was in place"
    lone = write_pack(
        fast_store.path / "objects", [PackObject(b"blob", body, object_id(b"blob", body))], durability=NOT_FLUSHED
    )
    lone.with_suffix(".idx").unlink()
    assert packing.pack(fast_store.path, "full")
    assert all(p.with_suffix(".idx").exists() for p in packs(fast_store.path))
    assert_fsck_clean(fast_store.path)
    assert fast_store.get(note.id).content == "kept"


def test_a_small_store_at_rest_takes_at_most_64_kib(
    fast_gm: Gitmem, fast_store: MemoryStore, quick_policy: list[bool]
) -> None:
    """Issue 27: a store of a few small notes, gone quiet and closed, costs about what Git costs (its bare
    skeleton with one pack is ~40 KiB by du): one pack, no index log, an index of a few pages."""
    fast_store.create("/people/sam.md", "Sam prefers terraform plans against staging first.")
    fast_store.create("/projects/acme.md", "# Acme\n- single-tenant\n")
    wait_for_consolidation(quick_policy)
    fast_gm.close()
    allocated, _ = disk_of(fast_store.path)
    assert len(packs(fast_store.path)) == 1 and packing.loose_objects(fast_store.path).count == 0
    assert allocated <= 64 << 10, allocated


def test_the_quiet_watcher_takes_stores_in_the_order_they_went_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written again goes back in line at its last write: never consolidated before it has been
    quiet that long, and after a store that went quiet first."""
    monkeypatch.setattr(policy, "QUIET_SECONDS", 0.3)
    monkeypatch.setattr(packing, "worth_consolidating", lambda _path: False)
    repos = {}
    for name in ("a", "b"):
        repos[name] = tmp_path / f"{name}.git"
        git(tmp_path, "init", "-q", "--bare", str(repos[name]))
        main = repos[name] / "refs" / "heads" / "main"
        main.write_text("0" * 40 + "\n")
        os.utime(main, (time.time() - 60, time.time() - 60))  # no other process writes it
    quiet: list[tuple[str, float]] = []

    def heard(name: str) -> Callable[[], None]:
        return lambda: quiet.append((name, time.monotonic()))

    watcher = policy._QuietWatcher()
    last = {}
    for name in ("a", "b", "a"):
        last[name] = time.monotonic()
        watcher.wrote(repos[name], heard(name))
        time.sleep(0.1)
    deadline = time.monotonic() + 10
    while len(quiet) < 2:
        assert time.monotonic() < deadline, quiet
        time.sleep(0.02)
    assert [name for name, _ in quiet] == ["b", "a"]
    assert all(when >= last[name] + policy.QUIET_SECONDS for name, when in quiet)
