"""The write path shared by threads: one store object used by many threads at once (as a web server's
thread pool does) keeps every transaction whole, answers every landed write with success, and never
rebuilds its index because of a stale view of ``main``."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator

import pytest

from gitmem.engine.index import store_index as index_module
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import PreconditionFailed
from gitmem.git import repository
from gitmem.git.pack import policy as maintenance
from tests.checks import assert_fsck_clean, index_snapshot, run_threads

THREADS = 12
ROUNDS = 6


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Switch threads every few microseconds, so interleavings that are rare in production happen."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def push_file(store: MemoryStore, tree_path: str, content: str) -> None:
    """Move main as a push would, with the Git layer alone: the index is not told."""
    repo = store.repo
    with repository.writer_lock(store.path):
        tip = repository.read_tip(repo)
        assert tip is not None
        blob = repo.create_blob(content.encode())
        tree = repository.tree_with(repo, repo[tip].tree, {tree_path: blob})
        commit = repository.commit(repo, tree=tree, parent=tip, message=f"push {tree_path}\n", author=repo[tip].author)
        assert repository.compare_and_swap(repo, tip, commit)


@pytest.mark.usefixtures("busy_switching")
def test_one_store_object_shared_by_many_threads(
    fast_store: MemoryStore, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers (read-modify-write with preconditions, and creates) and readers that catch the index up
    share one store object; no thread sees another's transaction, no update is lost, no rebuild."""
    store = fast_store
    monkeypatch.setattr(maintenance, "after_write", lambda *args, **kwargs: None)  # no repack under git fsck
    shared = store.create("/shared.md", "")

    writers = [me for me in range(THREADS) if me % 3]
    writers_done = threading.Barrier(len(writers) + 1)  # the writers, and the thread that tells readers
    all_written = threading.Event()

    def work(me: int) -> None:
        if me == 0:
            writers_done.wait()
            all_written.set()
        if me % 3 == 0:  # readers: list and read, catching the index up while others commit
            while not all_written.is_set():
                store.list(limit=50)
                store.get(shared.id)
            return
        try:
            write(me)
        finally:
            writers_done.wait()

    def write(me: int) -> None:
        for i in range(ROUNDS):
            push_file(store, f"pushed/{me}/{i}.md", f"pushed {i}")  # as a push: only readers catch up
            store.create(f"/t{me}/{i}.md", f"thread {me} note {i}")
            while True:
                current = store.get(shared.id)
                try:
                    store.update(
                        shared.id,
                        content=(current.content or "") + f"t{me} {i}\n",
                        expected_sha256=current.content_sha256,
                    )
                    break
                except PreconditionFailed:
                    continue

    with caplog.at_level(logging.INFO, logger="gitmem.engine.index.store_index"):
        errors = run_threads(THREADS, work)
    assert errors == []
    assert not [r for r in caplog.records if "rebuilding" in r.getMessage()]
    for me in writers:
        assert store.get_by_path(f"/pushed/{me}/{ROUNDS - 1}.md").content == f"pushed {ROUNDS - 1}"
    lines = (store.get(shared.id).content or "").splitlines()
    assert sorted(lines) == sorted(f"t{me} {i}" for me in writers for i in range(ROUNDS))
    for me in writers:
        assert [line for line in lines if line.startswith(f"t{me} ")] == [f"t{me} {i}" for i in range(ROUNDS)]
        for i in range(ROUNDS):
            assert store.get_by_path(f"/t{me}/{i}.md").content == f"thread {me} note {i}"
    incremental = index_snapshot(store)
    store.index.rebuild()
    assert index_snapshot(store) == incremental
    assert_fsck_clean(store.path)


def test_a_stale_view_of_main_never_rebuilds_the_index(
    fast_store: MemoryStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A reader that read the tip before another writer moved main and indexed it must not take its
    old tip for a rewrite (that rebuilt the whole index, and moved it backwards)."""
    store = fast_store
    store.create("/one.md", "1")
    stale = repository.read_tip(store.repo)
    store.create("/two.md", "2")  # main and the index move on past ``stale``
    fresh = store.index.indexed_tip()
    reads = iter([stale])
    real_read_tip = repository.read_tip  # what the index's own binding, patched below, is
    monkeypatch.setattr(index_module, "read_tip", lambda repo: next(reads, None) or real_read_tip(repo))
    with caplog.at_level(logging.INFO, logger="gitmem.engine.index.store_index"):
        store.index.catch_up()
    assert store.index.indexed_tip() == fresh
    assert not [r for r in caplog.records if "rebuilding" in r.getMessage()]
    assert store.get_by_path("/two.md").content == "2"
