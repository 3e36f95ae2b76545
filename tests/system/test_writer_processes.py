"""Several real processes write into one store at once: nothing is lost, each process's writes keep
their order, and a note they all update with preconditions ends in a state that tells every update."""

from __future__ import annotations

import itertools
import subprocess
import sys
from typing import Any

import pytest

from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.model import Version
from tests import REPO_ROOT
from tests.checks import assert_fsck_clean, index_snapshot, listed_notes, start_together

# Several writer processes at once.
pytestmark = pytest.mark.slow

PROCESSES = 4
WRITES = 200
SHARED_EVERY = 10  # each process also updates the shared note after every 10th note of its own

WORKER = """
import sys
import time
from gitmem.errors import PreconditionFailed
from gitmem.engine.gitmem import Gitmem

home, workspace_id, store_id, shared_id, me, writes, every = sys.argv[1:]
me, writes, every = int(me), int(writes), int(every)
store = Gitmem.open(home, fsync="never").store(workspace_id, store_id)
print("ready", flush=True)
sys.stdin.readline()  # everyone starts together
conflicts = 0
for i in range(writes):
    note = store.create(f"/p{me}/{i:03d}.md", f"process {me} note {i}")
    print(f"C {i} {note.id}", flush=True)
    if i % every == every - 1:
        while True:  # read, change, write only if nobody else did: retry until it lands
            current = store.get(shared_id)
            time.sleep(0.005)  # think a little: let the others race us
            try:
                store.update(shared_id, content=current.content + f"p{me} {i}\\n",
                             expected_sha256=current.content_sha256)
                break
            except PreconditionFailed:
                conflicts += 1
print(f"done {conflicts}", flush=True)
"""


def all_versions(store: MemoryStore, limit: int = 100, **kwargs: Any) -> list[Version]:
    versions: list[Version] = []
    page = None
    while True:
        result = store.versions(limit=limit, page=page, **kwargs)
        versions += result.items
        page = result.next_page
        if page is None:
            return versions[::-1]  # oldest first


def test_four_processes_writing_into_one_store(gm: Gitmem, workspace: Workspace, store: MemoryStore) -> None:
    shared = store.create("/shared.md", "")
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                str(gm.home),
                workspace.id,
                store.id,
                shared.id,
                str(me),
                str(WRITES),
                str(SHARED_EVERY),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
        )
        for me in range(PROCESSES)
    ]
    start_together(workers)
    outputs = []
    for worker in workers:
        out, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, err
        outputs.append(out.splitlines())

    # Every acknowledged note is there with its content: 4 x 200.
    listed = {n.path: n for n in listed_notes(store.list(limit=1000).items)}
    assert len(listed) == PROCESSES * WRITES + 1
    for me, lines in enumerate(outputs):
        acked = [line.split() for line in lines if line.startswith("C ")]
        assert [int(i) for _, i, _ in acked] == list(range(WRITES))
        for _, i, memory_id in acked:
            assert listed[f"/p{me}/{int(i):03d}.md"].id == memory_id
            assert store.get(memory_id).content == f"process {me} note {int(i)}"

    # Each process's writes appear in history in the order it made them.
    versions = all_versions(store)
    assert len(versions) == 1 + PROCESSES * WRITES + PROCESSES * (WRITES // SHARED_EVERY)
    for me in range(PROCESSES):
        mine = [v.path for v in versions if v.path and v.path.startswith(f"/p{me}/")]
        assert mine == [f"/p{me}/{i:03d}.md" for i in range(WRITES)]
    seqs = [row.seq for row in store.index.all_versions()]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)

    # The shared note: every update landed exactly once, each on top of the one before.
    final = store.get(shared.id).content or ""
    lines = final.splitlines()
    expected = {f"p{me} {i}" for me in range(PROCESSES) for i in range(SHARED_EVERY - 1, WRITES, SHARED_EVERY)}
    assert sorted(lines) == sorted(expected) and len(lines) == len(expected)
    for me in range(PROCESSES):
        assert [line for line in lines if line.startswith(f"p{me} ")] == [
            f"p{me} {i}" for i in range(SHARED_EVERY - 1, WRITES, SHARED_EVERY)
        ]
    history = all_versions(store, memory_id=shared.id, limit=20, with_content=True)
    assert [v.operation for v in history] == ["created"] + ["modified"] * len(expected)
    for older, newer in itertools.pairwise(history):
        assert newer.content is not None and older.content is not None
        assert newer.content.startswith(older.content) and newer.content.count("\n") == older.content.count("\n") + 1
    conflicts = sum(int(lines[-1].split()[1]) for lines in outputs)
    print(f"{conflicts} precondition failures were retried")

    assert_fsck_clean(store.path)
    incremental = index_snapshot(store)
    store.index.rebuild()
    assert index_snapshot(store) == incremental
