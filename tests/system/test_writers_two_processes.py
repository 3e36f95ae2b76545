"""Writers in several threads of two processes at once, on one store and on many: no update is lost
(each writer appends lines only it writes, so an idempotent retry could not hide a lost one), and a
writer killed in the middle of a batch loses no acknowledged write and leaves the store clean."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.fsck import check_store
from gitmem.engine.gitmem import Gitmem
from tests import REPO_ROOT
from tests.checks import assert_fsck_clean, index_snapshot, start_together

pytestmark = pytest.mark.slow  # writer processes, SIGKILLs

# argv: home workspace fsync rounds threads store_id... ; thread t of process p writes into store t % n.
WORKER = """
import sys, threading
from gitmem.git.pack import policy as maintenance
from gitmem.errors import PreconditionFailed
from gitmem.engine.gitmem import Gitmem

maintenance.after_write = lambda *args, **kwargs: None  # no background repack under the checks' git fsck

home, workspace_id, fsync, me, rounds, threads, *store_ids = sys.argv[1:]
me, rounds, threads = int(me), int(rounds), int(threads)
gm = Gitmem.open(home, fsync="always" if fsync == "1" else "never")
out = threading.Lock()

def say(line):
    with out:
        print(line, flush=True)

def write(t):
    store = gm.store(workspace_id, store_ids[t % len(store_ids)])
    own = store.create(f"/p{me}/t{t}.md", "")
    shared = store.get_by_path("/shared.md")
    for i in range(rounds):
        current = store.get(own.id)
        note = store.update(own.id, content=current.content + f"p{me} t{t} {i}\\n",
                            expected_sha256=current.content_sha256)
        say(f"A {store.id} {own.id} {i} {note.content_sha256}")  # acknowledged
        while True:
            shared = store.get(shared.id)
            try:
                store.update(shared.id, content=shared.content + f"p{me} t{t} {i}\\n",
                             expected_sha256=shared.content_sha256)
                break
            except PreconditionFailed:
                continue
        say(f"S {store.id} {i}")

say("ready")
sys.stdin.readline()
workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
say("done")
"""


def spawn(
    gm: Gitmem, workspace: Workspace, me: int, rounds: int, threads: int, store_ids: list[str], *, fsync: bool = False
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            WORKER,
            str(gm.home),
            workspace.id,
            "1" if fsync else "0",
            str(me),
            str(rounds),
            str(threads),
            *store_ids,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        start_new_session=True,
    )


def check_stores(gm: Gitmem, workspace: Workspace, store_ids: list[str], expected: dict[str, list[str]]) -> None:
    """Every note holds exactly the lines its writer appended, in order; the shared notes every line."""
    for store_id in store_ids:
        store = gm.store(workspace.id, store_id)
        shared_lines: list[str] = []
        for path, lines in expected.items():
            if path.startswith(store_id + ":"):
                note = store.get_by_path(path.split(":", 1)[1])
                assert (note.content or "").splitlines() == lines
                shared_lines += lines
        shared = (store.get_by_path("/shared.md").content or "").splitlines()
        assert sorted(shared) == sorted(shared_lines)
        assert_fsck_clean(store.path)
        assert check_store(store).ok
        incremental = index_snapshot(store)
        store.index.rebuild()
        assert index_snapshot(store) == incremental


def run_two_processes(gm: Gitmem, workspace: Workspace, store_ids: list[str], threads: int, rounds: int) -> None:
    for store_id in store_ids:
        gm.store(workspace.id, store_id).create("/shared.md", "")
    workers = [spawn(gm, workspace, me, rounds, threads, store_ids) for me in range(2)]
    start_together(workers)
    expected: dict[str, list[str]] = {}
    for me, worker in enumerate(workers):
        out, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, err
        assert out.splitlines()[-1] == "done"
        for t in range(threads):
            store_id = store_ids[t % len(store_ids)]
            expected[f"{store_id}:/p{me}/t{t}.md"] = [f"p{me} t{t} {i}" for i in range(rounds)]
    check_stores(gm, workspace, store_ids, expected)


def test_two_processes_of_threads_on_one_store(fast_gm: Gitmem) -> None:
    workspace = fast_gm.catalog.create_workspace("one")
    store_id = fast_gm.create_store(workspace.id, "one").id
    run_two_processes(fast_gm, workspace, [store_id], threads=4, rounds=12)


def test_two_processes_of_threads_on_many_stores(fast_gm: Gitmem) -> None:
    workspace = fast_gm.catalog.create_workspace("many")
    store_ids = [fast_gm.create_store(workspace.id, f"s{i}").id for i in range(4)]
    run_two_processes(fast_gm, workspace, store_ids, threads=4, rounds=10)


def _until_acknowledged(worker: subprocess.Popen[str]) -> list[str]:
    """The worker's lines up to and with its first acknowledged write (all of them if it ends first)."""
    assert worker.stdout is not None
    seen: list[str] = []
    for line in worker.stdout:
        seen.append(line.rstrip("\n"))
        if line.startswith("A "):
            break
    return seen


def test_sigkill_in_the_middle_of_batches_loses_no_acknowledged_write(gm: Gitmem, workspace: Workspace) -> None:
    rng = random.Random(os.environ.get("GITMEM_CRASH_SEED", "3"))
    store_id = gm.create_store(workspace.id, "crash").id
    store = gm.store(workspace.id, store_id)
    store.create("/shared.md", "")
    acked: dict[str, tuple[int, str]] = {}  # memory id -> its last acknowledged line and content_sha256
    for round_number in range(3):
        worker = spawn(gm, workspace, round_number, 1000, 4, [store_id], fsync=True)
        start_together([worker])
        # The kill falls at a random moment after the round's first acknowledged write (a fixed delay
        # from the start could fall before any on a busy machine, and then the round proves nothing).
        seen = _until_acknowledged(worker)
        time.sleep(rng.uniform(0.0, 0.6))
        os.killpg(worker.pid, signal.SIGKILL)
        out, _ = worker.communicate(timeout=60)
        for line in seen + out.splitlines():
            parts = line.split()
            if len(parts) == 5 and parts[0] == "A":
                acked[parts[2]] = (int(parts[3]), parts[4])
    assert len(acked) >= 3, "a round ended with no acknowledged write"
    gm._forget(store_id)
    lock = store.path / "refs" / "heads" / "main.lock"
    if lock.exists():  # a kill inside the compare-and-swap: make it look as old as a crash's lock is
        os.utime(lock, (time.time() - 60, time.time() - 60))
    fresh = Gitmem.open(gm.home).store(workspace.id, store_id)
    for memory_id, (i, digest) in acked.items():
        lines = (fresh.get(memory_id).content or "").splitlines(keepends=True)
        assert len(lines) > i, f"{memory_id} lost an acknowledged update"
        assert hashlib.sha256("".join(lines[: i + 1]).encode()).hexdigest() == digest
    assert_fsck_clean(fresh.path)
    assert check_store(fresh).ok
    assert fresh.create("/after.md", "still writable").path == "/after.md"
