"""A folder of 10,000 notes behaves like any other (reads, paged listings, writes, renames; redaction
and pruning with a big folder), and the trees gitmem writes are the very trees stock ``git`` writes
for the same files (``git add`` + ``git write-tree``: identical tree ids, so identical bytes).

The big folder is made in one commit with ``git fast-import`` (``bench.flat.seed_notes``), not by
10,000 writes; the engine then writes on top of it as on any store.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.flat import seed_notes
from gitmem.clock import FrozenClock
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.redaction import redact
from gitmem.engine.rewrite.retention import prune_store
from gitmem.engine.store.group_commit import committer_for
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import NotFound, PathConflict
from gitmem.git import repository, trees
from gitmem.git.pack import packing
from gitmem.model import MemoryPrefix, Note
from tests.checks import assert_fsck_clean, git, run_threads

BIG = 9_990  # the store's limit is 10,000 notes: room for the writes below


def text(i: int) -> str:
    return f"note {i}: " + "remember this " * (i % 7)


def big_path(i: int) -> str:
    return f"/notes/note-{i:05d}.md"


_names = itertools.count()


def new_store(gm: Gitmem) -> MemoryStore:
    workspace = gm.catalog.create_workspace(f"flat {next(_names)}")
    return gm.store(workspace.id, gm.create_store(workspace.id, "flat").id)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    gm = Gitmem.open(tmp_path_factory.mktemp("flat") / "home", clock=FrozenClock(), fsync="never")
    store = new_store(gm)
    seed_notes(store.path, {big_path(i): text(i) for i in range(BIG)})
    return store


def tree_size(store: MemoryStore, folder: str) -> int:
    return len(git(store.path, "ls-tree", f"main:{folder}").splitlines())


def assert_stock_tree(store: MemoryStore, folder: str) -> None:
    """The folder's tree on ``main`` is the one stock ``git mktree`` makes of its own listing (which it
    sorts itself): in Git's order, each name once. Packers are held off: ``mktree`` checks each entry's
    object without looking again when a repack has just replaced the pack it was in."""
    with repository.packers_held_off(store.path):
        listing = git(store.path, "ls-tree", f"main:{folder}")
        made = subprocess.run(["git", "-C", str(store.path), "mktree"], input=listing, capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        assert made.stdout.strip() == git(store.path, "rev-parse", f"main:{folder}").strip()


def all_pages(store: MemoryStore, prefix: str, limit: int) -> list[Note | MemoryPrefix]:
    items, page, pages = [], None, 0
    while True:
        result = store.list(prefix, limit=limit, page=page)
        items += result.items
        pages += 1
        page = result.next_page
        if page is None:
            assert pages == max(1, -(-len(items) // limit))  # no empty last page
            return items


def test_a_big_folder_reads_and_lists(big: MemoryStore) -> None:
    assert big.index.catch_up() is not None
    assert big.index.totals()[0] >= BIG
    note = big.get_by_path(big_path(4321))
    assert note.content == text(4321)
    assert big.get(note.id).path == big_path(4321)
    listed = [item.path for item in all_pages(big, "/notes/", 1000) if isinstance(item, Note)]
    seeded = [p for p in listed if p.startswith("/notes/note-") and len(p) == len(big_path(0))]
    assert seeded[:BIG] == [big_path(i) for i in range(BIG)]  # path order, every note once
    assert len(set(listed)) == len(listed)
    top = big.list("/", depth=1, limit=10).items
    assert [item.path for item in top if isinstance(item, MemoryPrefix)] == ["/notes/"]


def test_writes_in_a_big_folder_change_one_entry(big: MemoryStore) -> None:
    before = tree_size(big, "notes")
    created = big.create("/notes/new.md", "a new note")
    assert tree_size(big, "notes") == before + 1
    updated = big.update(big.get_by_path(big_path(7)).id, content="seven, revised")
    assert big.get(updated.id).content == "seven, revised"
    moved = big.update(big.get_by_path(big_path(8)).id, path="/notes/eight.md")
    assert moved.path == "/notes/eight.md"
    with pytest.raises(NotFound):
        big.get_by_path(big_path(8))
    assert big.get(moved.id).content == text(8)
    assert git(big.path, "show", "main:notes/eight.md") == text(8)
    big.delete(created.id)
    assert tree_size(big, "notes") == before  # +1 created -1 deleted, the rename kept the count
    assert git(big.path, "ls-tree", "--name-only", "main", "notes/eight.md", "notes/note-00008.md").split() == [
        "notes/eight.md"
    ]
    assert big.get_by_path(big_path(9)).content == text(9)  # its neighbours untouched
    assert_stock_tree(big, "notes")
    assert_fsck_clean(big.path)


def test_stock_git_clones_a_big_folder_and_shows_its_log(big: MemoryStore, tmp_path: Path) -> None:
    note = big.create("/notes/cloned.md", "seen in the clone")
    big.update(note.id, content="seen in the clone, revised")
    clone = tmp_path / "clone"  # the objects over Git's protocol; checking 10,000 files out adds nothing
    subprocess.run(
        ["git", "clone", "-q", "--no-local", "--no-checkout", str(big.path), str(clone)],
        check=True,
        capture_output=True,
    )
    assert git(clone, "show", "origin/main:notes/cloned.md") == "seen in the clone, revised"
    assert git(clone, "show", "origin/main:notes/note-04321.md") == text(4321)
    assert (
        git(clone, "ls-tree", "--name-only", "origin/main:notes").split()
        == git(big.path, "ls-tree", "--name-only", "main:notes").split()
    )
    log = git(clone, "log", "-p", "-2", "--format=%s", "origin/main")
    assert "+seen in the clone, revised" in log and "-seen in the clone" in log
    assert log.count("diff --git a/notes/cloned.md") == 2


def test_the_parsed_folder_follows_main_moved_by_another_process(big: MemoryStore) -> None:
    """The writer keeps the folder's tree parsed between writes; when another process moves ``main``
    (here stock ``git fast-import``), the next write starts from that process's tree, losing nothing."""
    big.create("/notes/mine-1.md", "one")  # the folder is parsed and kept
    mine = bytes.fromhex(git(big.path, "rev-parse", "main:notes").strip())
    seed_notes(big.path, {"/notes/theirs.md": "from another process"})
    theirs = bytes.fromhex(git(big.path, "rev-parse", "main:notes").strip())
    big.create("/notes/mine-2.md", "two")
    kept = committer_for(big.path).trees
    mine_tree, their_tree = kept.get(mine), kept.get(theirs)
    assert mine_tree is not None and their_tree is not None  # their folder was read, with ours as a hint:
    shared = set(map(id, mine_tree.pieces)) & set(map(id, their_tree.pieces))
    assert len(shared) >= len(mine_tree.pieces) - 2  # only the piece that changed was parsed again
    listed = git(big.path, "ls-tree", "--name-only", "main", "notes/mine-1.md", "notes/theirs.md", "notes/mine-2.md")
    assert listed.split() == ["notes/mine-1.md", "notes/mine-2.md", "notes/theirs.md"]
    assert big.get_by_path("/notes/theirs.md").content == "from another process"
    assert_stock_tree(big, "notes")


def test_threads_write_into_a_big_folder_together(big: MemoryStore) -> None:
    """Writers in many threads: their writes share batches (a batch's versions of the folder go into
    one pack, each after the first as a delta), and every note lands once, in Git's order."""
    before = tree_size(big, "notes")

    def write(n: int) -> None:
        note = big.create(f"/notes/thread-{n}.md", f"thread {n}")
        big.update(note.id, content=f"thread {n}, revised")

    assert not run_threads(6, write)
    assert tree_size(big, "notes") == before + 6
    assert {git(big.path, "show", f"main:notes/thread-{n}.md") for n in range(6)} == {
        f"thread {n}, revised" for n in range(6)
    }
    assert_stock_tree(big, "notes")
    assert_fsck_clean(big.path)


def test_redaction_and_pruning_with_a_big_folder(fast_gm: Gitmem, clock: FrozenClock) -> None:
    """A history rewrite replays every version, one commit each: with a flat folder each replayed commit
    writes a tree as big as the folder, so this store's folder is smaller than ``big``'s."""
    store = new_store(fast_gm)
    notes = 1_000
    seed_notes(store.path, {big_path(i): text(i) for i in range(notes)}, when=clock.now + dt.timedelta(days=90))
    secret = store.create("/notes/secret.md", "the secret")
    store.update(secret.id, content="nothing to see")
    first, _second = reversed(store.versions(memory_id=secret.id).items)
    gone = store.create("/notes/gone.md", "short-lived")
    store.delete(gone.id)
    packing.pack(store.path, "full")  # the old blobs are in a pack, as after a quiet spell

    redact(store, first.id)
    assert store.version(first.id).content is None
    assert repository.git(store.path, "cat-file", "-e", secret.blob_id).returncode != 0  # gone for good
    assert store.get(secret.id).content == "nothing to see"

    clock.advance(days=60)
    report = prune_store(store, days=30, now=clock.now)
    assert report.ok and gone.version_id in report.dropped
    assert repository.git(store.path, "cat-file", "-e", gone.blob_id).returncode != 0
    assert store.index.totals()[0] == notes + 1
    assert store.get_by_path(big_path(notes - 1)).content == text(notes - 1)
    assert len(all_pages(store, "/notes/", 400)) == notes + 1
    assert tree_size(store, "notes") == notes + 1
    after = store.create("/notes/after-the-rewrites.md", "written on the rewritten history")
    assert tree_size(store, "notes") == notes + 2  # the kept folder, not the one before the rewrites
    assert git(store.path, "show", "main:notes/after-the-rewrites.md") == "written on the rewritten history"
    assert store.get(after.id).path == "/notes/after-the-rewrites.md"
    assert_stock_tree(store, "notes")
    assert_fsck_clean(store.path)


# -- the trees are stock git's ----------------------------------------------------------------------

# Names around the folders "f" and "f-x" in Git's tree order (a folder sorts as if its name ended in
# "/": "f-x/" < "f.md" < "f/" < "f0.md"), plus non-ASCII and upper case.
FOLDERS = ["", "f/", "f-x/", "f/g/"]
LEAVES = ["a.md", "f.md", "f0.md", "f-x.md", "F.md", "b", "é.md", "z z.md", "f_"]
PATHS = [f"/{folder}{leaf}" for folder in FOLDERS for leaf in LEAVES]

operation = st.tuples(
    st.sampled_from(["write", "move", "delete"]),
    st.sampled_from(PATHS),
    st.sampled_from(PATHS),
    st.text(alphabet="abc\n", min_size=0, max_size=8),
)


def stock_git_tree(repo_path: Path, files: dict[str, str], scratch: Path) -> str:
    """The tree ``git add`` + ``git write-tree`` make for ``files`` in a work tree of their own."""
    work = scratch / "work"
    for path, content in files.items():
        target = work / path[1:]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    work.mkdir(exist_ok=True)
    env = dict(os.environ, GIT_INDEX_FILE=str(scratch / "index"), GIT_DIR=str(repo_path), GIT_WORK_TREE=str(work))
    subprocess.run(["git", "add", "-A", "."], cwd=work, env=env, check=True, capture_output=True)
    return subprocess.run(
        ["git", "write-tree"], cwd=work, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=st.lists(operation, min_size=1, max_size=12))
def test_trees_are_the_trees_stock_git_writes(
    fast_gm: Gitmem,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    operations: list[tuple[str, str, str, str]],
) -> None:
    monkeypatch.setattr(trees, "PIECE_ENTRIES", 2)  # a folder of a few notes in several pieces, as 10,000
    store = new_store(fast_gm)
    model: dict[str, str] = {}  # path -> content: what the store must hold
    ids: dict[str, str] = {}  # path -> memory id

    def twin(path: str, moving: str | None = None) -> bool:
        """Another note differs only in case: the store refuses that as a path conflict."""
        return any(p not in (path, moving) and p.casefold() == path.casefold() for p in model)

    for kind, path, other, content in operations:
        if (kind == "write" and path not in model and twin(path)) or (
            kind == "move" and path in model and other not in model and twin(other, moving=path)
        ):
            if kind == "write":
                with pytest.raises(PathConflict):
                    store.create(path, content)
            else:
                with pytest.raises(PathConflict):
                    store.update(ids[path], path=other)
            continue
        if kind == "write" and path in model:
            store.update(ids[path], content=content)
            model[path] = content
        elif kind == "write":
            ids[path] = store.create(path, content).id
            model[path] = content
        elif kind == "move" and path in model and other not in model:
            store.update(ids[path], path=other)
            model[other], ids[other] = model.pop(path), ids.pop(path)
        elif kind == "delete" and path in model:
            store.delete(ids.pop(path))
            del model[path]
    if repository.read_tip(store.repo) is None:
        return  # nothing was written
    expected = stock_git_tree(store.path, model, tmp_path_factory.mktemp("stock"))
    assert git(store.path, "rev-parse", "main^{tree}").strip() == expected
    assert {item.path for item in all_pages(store, "/", 100)} == set(model)
