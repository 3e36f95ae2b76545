"""Crash tests: a writer killed with SIGKILL at random moments (mid-write, mid-pack, one store or several
sharing flushes) loses no acknowledged write, leaves ``git fsck --full`` clean and an index that agrees
with a rebuild; a ref lock left by a crash is recovered, a live one makes the store busy (not wedged,
not corrupted)."""

from __future__ import annotations

import fcntl
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import StoreBusy
from gitmem.git import repository
from gitmem.git.pack import packing
from tests import REPO_ROOT
from tests.checks import assert_fsck_clean, index_snapshot, store_state

# Writers and packers killed with SIGKILL in subprocesses: slow by nature.
pytestmark = pytest.mark.slow


WRITER = """
import sys
from gitmem.engine.store import store as store_module
from gitmem.engine.gitmem import Gitmem

home, workspace_id, store_id, counter_id, start, pack_every = sys.argv[1:]
store_module.PACK_EVERY_WRITES = int(pack_every)  # pack often, so kills land mid-pack too
store = Gitmem.open(home, fsync="always").store(workspace_id, store_id)
n = int(start)
while True:
    note = store.create(f"/w/{n // 50}/{n}.md", f"note {n} " + "x" * (n % 300))
    print(f"C {note.id} {note.content_sha256}", flush=True)  # acknowledged: the call returned
    if n % 3 == 0:
        counter = store.update(counter_id, content=f"{n}")
        print(f"U {n} {counter.content_sha256}", flush=True)
    n += 1
"""

PACKER = """
import sys
from pathlib import Path
from gitmem.git.pack.packing import pack
print("packing", flush=True)
pack(Path(sys.argv[1]), "full")
"""


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        start_new_session=True,
    )


def wait_for_packers(repo_path: Path, timeout: float = 60.0) -> None:
    """Background packers orphaned by a kill may still run: wait until none holds the pack lock."""
    fd = os.open(repo_path / "gitmem" / "pack.lock", os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError:
                assert time.monotonic() < deadline, "a packer never finished"
                time.sleep(0.05)
    finally:
        os.close(fd)


def test_sigkill_loses_no_acknowledged_write(gm: Gitmem, workspace: Workspace, store: MemoryStore) -> None:
    rng = random.Random(os.environ.get("GITMEM_CRASH_SEED", "2"))
    counter = store.create("/counter.md", "-1")
    acked_notes: dict[str, str] = {}
    acked_counter: list[tuple[int, str]] = []
    kills = 0
    for round_number in range(6):
        args = (str(gm.home), workspace.id, store.id, counter.id, str(round_number * 100_000), "5")
        with spawn(WRITER, *args) as writer:  # its pipes closed on the way out
            assert writer.stdout is not None
            first = writer.stdout.readline()  # the engine is loaded and writing
            assert first, writer.stderr.read() if writer.stderr else "the writer died"
            time.sleep(rng.uniform(0.3, 1.2))
            if round_number % 2:
                os.killpg(writer.pid, signal.SIGKILL)  # the writer and any packer it started
            else:
                writer.send_signal(signal.SIGKILL)  # the writer alone: its packer runs on, orphaned
            writer.wait()
            kills += 1
            assert writer.returncode == -signal.SIGKILL
            lines = first + writer.stdout.read()
            for line in lines.splitlines():
                parts = line.split()
                if len(parts) != 3:
                    continue  # the kill cut this line short: not acknowledged
                if parts[0] == "C":
                    acked_notes[parts[1]] = parts[2]
                else:
                    acked_counter.append((int(parts[1]), parts[2]))
    assert kills == 6 and len(acked_notes) > 20, f"only {len(acked_notes)} writes acknowledged"

    # Kill full repacks at random points, too.
    for _ in range(3):
        with spawn(PACKER, str(store.path)) as packer:
            assert packer.stdout is not None and packer.stdout.readline().strip() == "packing"
            time.sleep(rng.uniform(0.0, 0.08))
            os.killpg(packer.pid, signal.SIGKILL)

    wait_for_packers(store.path)
    repo_path = store.path
    packs = list((repo_path / "objects" / "pack").glob("pack-*.pack"))
    assert packs, "background packing never ran during the writes"
    # Kills inside a write or a pack leave temporary files behind: garbage, never corruption.
    leftovers = [p.name for p in (repo_path / "objects").rglob("*tmp*")]
    print(
        f"{len(acked_notes)} notes and {len(acked_counter)} counter updates acknowledged; {len(packs)} packs;"
        f" {len(leftovers)} temporary files left by kills"
    )
    gm._forget(store.id)
    lock = repo_path / "refs" / "heads" / "main.lock"
    if lock.exists():  # a kill inside the compare-and-swap: make it look as old as a crash's lock is
        os.utime(lock, (time.time() - 60, time.time() - 60))

    fresh = Gitmem.open(gm.home).store(workspace.id, store.id)
    for memory_id, digest in acked_notes.items():
        note = fresh.get(memory_id)
        assert note.content_sha256 == digest, f"{memory_id} lost its acknowledged content"
        assert note.content is not None and fresh.versions(memory_id=memory_id).items[-1].operation == "created"
    final = int(fresh.get(counter.id).content or "-1")
    assert final >= max(n for n, _ in acked_counter)
    counter_shas = {v.content_sha256 for v in fresh.versions(memory_id=counter.id, limit=100).items}
    page = fresh.versions(memory_id=counter.id, limit=100).next_page
    while page:
        result = fresh.versions(memory_id=counter.id, limit=100, page=page)
        counter_shas |= {v.content_sha256 for v in result.items}
        page = result.next_page
    assert {digest for _, digest in acked_counter} <= counter_shas

    assert_fsck_clean(repo_path)
    fresh.index.catch_up()
    incremental = index_snapshot(fresh)
    fresh.index.rebuild()
    assert index_snapshot(fresh) == incremental
    assert fresh.create("/after/the/crashes.md", "still writable").path == "/after/the/crashes.md"
    # That write may start a background roll-up (the kills left many packs), which a full pack asked
    # for meanwhile leaves the work to (it answers False): wait for it, then the full pack...
    deadline = time.monotonic() + 60
    while not packing.pack(repo_path, "full"):
        assert time.monotonic() < deadline, "a packer never finished"
        wait_for_packers(repo_path)
    assert_fsck_clean(repo_path)  # ...completes
    assert all(fresh.get(m).content_sha256 == digest for m, digest in acked_notes.items())  # ...losing nothing


MANY_STORES_WRITER = """
import sys, threading
from gitmem.engine.gitmem import Gitmem

home, workspace_id, round_number, *store_ids = sys.argv[1:]
gm = Gitmem.open(home, fsync="always")
stores = [gm.store(workspace_id, store_id) for store_id in store_ids]
printing = threading.Lock()

def write(k, store):
    n = 0
    while True:
        note = store.create(f"/r{round_number}/{n}.md", f"note {n} of round {round_number} " + "x" * (n % 200))
        with printing:
            print(f"{k} {note.id} {note.content_sha256}", flush=True)  # acknowledged: the call returned
        n += 1

print("writing", flush=True)  # before any thread can print a note: the test reads this line first
for k, store in enumerate(stores):
    threading.Thread(target=write, args=(k, store), daemon=True).start()
threading.Event().wait()
"""


def test_sigkill_loses_no_acknowledged_write_of_stores_sharing_flushes(gm: Gitmem, workspace: Workspace) -> None:
    """Four stores written at once by one process, their batches sharing each syncfs
    (gitmem.durable.FlushGroup), killed at random moments: no store loses a write it acknowledged."""
    rng = random.Random(os.environ.get("GITMEM_CRASH_SEED", "3"))
    stores = [gm.create_store(workspace.id, f"shared-{k}").id for k in range(4)]
    acked: dict[int, dict[str, str]] = {k: {} for k in range(len(stores))}
    for round_number in range(3):
        with spawn(MANY_STORES_WRITER, str(gm.home), workspace.id, str(round_number), *stores) as writer:
            assert writer.stdout is not None
            try:
                first = writer.stdout.readline()
                time.sleep(rng.uniform(0.4, 1.0))
            finally:  # the writer never ends by itself: killed whatever happens here
                os.killpg(writer.pid, signal.SIGKILL)
                writer.wait()
            assert first.strip() == "writing", writer.stderr.read() if writer.stderr else "the writer died"
            for line in writer.stdout.read().splitlines():
                parts = line.split()
                if len(parts) == 3:  # else the kill cut it short: not acknowledged
                    acked[int(parts[0])][parts[1]] = parts[2]
    assert all(len(notes) > 3 for notes in acked.values()), {k: len(v) for k, v in acked.items()}
    fresh = Gitmem.open(gm.home)
    for k, store_id in enumerate(stores):
        repo_path = fresh.repo_path(store_id)
        wait_for_packers(repo_path)
        lock = repo_path / "refs" / "heads" / "main.lock"
        if lock.exists():  # a kill inside the compare-and-swap: as old as a crash's lock is
            os.utime(lock, (time.time() - 60, time.time() - 60))
        store = fresh.store(workspace.id, store_id)
        for memory_id, digest in acked[k].items():
            assert store.get(memory_id).content_sha256 == digest, f"{memory_id} lost its acknowledged content"
        assert_fsck_clean(repo_path)
        store.index.catch_up()
        incremental = index_snapshot(store)
        store.index.rebuild()
        assert index_snapshot(store) == incremental


def test_a_stale_ref_lock_left_by_a_crash_is_recovered(store: MemoryStore) -> None:
    store.create("/before.md", "x")
    lock = store.path / "refs" / "heads" / "main.lock"
    lock.write_text("0" * 40 + "\n")  # what a writer killed inside the compare-and-swap leaves
    old = time.time() - repository.STALE_REF_LOCK_SECONDS - 60
    os.utime(lock, (old, old))
    note = store.create("/after.md", "the next write succeeds")
    assert not lock.exists()
    assert store.get(note.id).content == "the next write succeeds"
    assert_fsck_clean(store.path)


def test_a_live_ref_lock_makes_the_store_busy_not_broken(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    note = store.create("/note.md", "x")
    original = repository.compare_and_swap
    monkeypatch.setattr(
        repository, "compare_and_swap", lambda *args, **kwargs: original(*args, **{**kwargs, "timeout": 0.2})
    )
    lock = store.path / "refs" / "heads" / "main.lock"
    lock.write_text("held by someone else\n")  # fresh: another process is inside its swap
    before = store_state(store)
    started = time.monotonic()
    with pytest.raises(StoreBusy) as busy:
        store.update(note.id, content="y")
    assert time.monotonic() - started < 5
    assert busy.value.retryable and busy.value.status == 409
    assert lock.read_text() == "held by someone else\n"  # not ours to remove
    lock.unlink()
    after = store_state(store)
    assert (after.tip, after.indexed_tip, after.notes, after.versions) == (
        before.tip,
        before.indexed_tip,
        before.notes,
        before.versions,
    )
    assert store.update(note.id, content="y").content_sha256 != note.content_sha256
    assert_fsck_clean(store.path)


HOLDER = """
import sys, time
from pathlib import Path
from gitmem.git.repository import writer_lock
with writer_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_writer_killed_holding_the_writer_lock_does_not_wedge_the_store(store: MemoryStore) -> None:
    with spawn(HOLDER, str(store.path)) as holder:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreBusy), repository.writer_lock(store.path, timeout=0.2):
            pass
        holder.send_signal(signal.SIGKILL)
    started = time.monotonic()
    store.create("/free.md", "the kernel released the lock")
    assert time.monotonic() - started < 2
