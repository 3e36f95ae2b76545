"""The Git plumbing of the write path against stock Git and libgit2: trees serialised in memory have the
ids ``git mktree`` gives the same entries, edits match pygit2's tree builder, commits match
``create_commit``, and a written pack passes ``git verify-pack`` and reads back."""

from __future__ import annotations

import subprocess
import zlib
from pathlib import Path

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitmem.durable import DURABLE, NOT_FLUSHED
from gitmem.git import repository, trees
from gitmem.git.pack.format import PackObject, adler32_combine, write_pack
from gitmem.git.trees import (
    EMPTY_TREE,
    MODE_BLOB,
    MODE_TREE,
    Tree,
    TreeCache,
    TreeEditor,
    TreeStore,
    commit_body,
    object_id,
)
from tests.checks import commit as commit_of
from tests.checks import tree as git_tree

# Names that sort differently as files and as folders ("a" < "a-b" < "a.md" < "a/" < "a0").
NAME_LIST = ["a", "a-b", "a.md", "a0", "a_", "b", "B", "é.md", "x y", "a.b.c", "-", "zz"]
NAMES = st.sampled_from(NAME_LIST)
OIDS = st.binary(min_size=20, max_size=20)


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> pygit2.Repository:
    return pygit2.init_repository(str(tmp_path_factory.mktemp("trees") / "repo.git"), bare=True)


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> int:
    """Trees cut into pieces of 2 entries (a few entries then span several pieces, as 10,000 do)."""
    monkeypatch.setattr(trees, "PIECE_ENTRIES", 2)
    return 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(NAMES, st.tuples(st.booleans(), OIDS), max_size=12))
@pytest.mark.usefixtures("small_pieces")
def test_tree_ids_match_git_mktree(bare: pygit2.Repository, entries: dict[str, tuple[bool, bytes]]) -> None:
    editor = TreeEditor(EMPTY_TREE)
    for name, (is_tree, oid) in entries.items():
        editor.insert(name.encode(), MODE_TREE if is_tree else MODE_BLOB, oid)
    tree = editor.tree()
    listing = "".join(
        f"{'040000 tree' if is_tree else '100644 blob'} {oid.hex()}\t{name}\n"
        for name, (is_tree, oid) in entries.items()
    )
    made = (
        subprocess.run(
            ["git", "-C", bare.path, "mktree", "--missing"], input=listing.encode(), capture_output=True, check=True
        )
        .stdout.decode()
        .strip()
    )
    assert object_id(b"tree", tree.body()).hex() == made
    assert Tree.parse(tree.body()).body() == tree.body()


PATHS = st.sampled_from(["a", "a.md", "a/b", "a/b.md", "a-b/c", "a/b/c", "n/x.md", "n/y.md", "n/z/w", "z"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.dictionaries(PATHS, st.one_of(st.none(), st.binary(max_size=3)), min_size=1, max_size=4),
        min_size=1,
        max_size=6,
    )
)
@pytest.mark.usefixtures("small_pieces")
def test_edits_match_pygit2s_tree_builder(bare: pygit2.Repository, steps: list[dict[str, bytes | None]]) -> None:
    """Edits in memory give the trees that repository.tree_with writes, step after step (folders that
    empty disappear; a file may become a folder and back)."""
    ours = TreeStore(TreeCache(max_entries=8), lambda oid: bare[oid.hex()].read_raw())
    our_root: bytes | None = None
    their_root: pygit2.Oid | None = None
    for step in steps:
        changes = {p: (bare.create_blob(c) if c is not None else None) for p, c in step.items()}
        if any(
            q.startswith(p + "/") and changes[p] is not None and changes[q] is not None
            for p in changes
            for q in changes
        ):
            continue  # a file and a folder of the same name, both set in one step: no write does that
        their_root = repository.tree_with(bare, git_tree(bare[their_root]) if their_root else None, changes)
        our_root = ours.edit(our_root, {p: (o.raw if o is not None else None) for p, o in changes.items()})
        assert our_root.hex() == str(their_root)
        for oid, body in ours.bodies.items():  # the trees must exist for the next step's reads
            assert str(bare.odb.write(pygit2.enums.ObjectType.TREE, body)) == oid.hex()


edit = st.tuples(st.booleans(), NAMES, st.booleans(), OIDS)  # insert or remove, name, folder?, id


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(edit, min_size=1, max_size=5), min_size=1, max_size=12))
def test_trees_in_pieces_match_a_sorted_listing(
    small_pieces: int, steps: list[list[tuple[bool, str, bool, bytes]]]
) -> None:
    """Edits of a tree in pieces against a dict: after every step the bytes are the sorted listing's,
    every name is found, the pieces stay within their bounds, and the pieces' compressed bytes inflate
    to the body. Each step edits the previous step's tree, which must not change."""
    model: dict[bytes, tuple[bytes, bytes]] = {}
    tree = EMPTY_TREE
    for step in steps:
        before, before_body = dict(model), tree.body()
        editor = TreeEditor(tree)
        for insert, name, is_folder, oid in step:
            if insert:
                mode = MODE_TREE if is_folder else MODE_BLOB
                editor.insert(name.encode(), mode, oid)
                model[name.encode()] = (mode, oid)
            else:
                editor.remove(name.encode())
                model.pop(name.encode(), None)
        previous, tree = tree, editor.tree()
        assert previous.body() == before_body and len(previous) == len(before)
        ordered = sorted(model.items(), key=lambda item: item[0] + (b"/" if item[1][0] == MODE_TREE else b""))
        assert tree.body() == b"".join(mode + b" " + name + b"\0" + oid for name, (mode, oid) in ordered)
        assert len(tree) == len(model)
        for name in NAME_LIST:
            assert tree.get(name.encode()) == model.get(name.encode())
        assert all(1 <= len(piece.keys) <= 2 * small_pieces for piece in tree.pieces)
        assert list(tree.firsts) == [piece.keys[0] for piece in tree.pieces]
        if tree.pieces:
            assert zlib.decompress(b"".join(tree.compressed())) == tree.body()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.dictionaries(NAMES, st.tuples(st.booleans(), OIDS), max_size=12),
    st.lists(edit, max_size=4),
)
@pytest.mark.usefixtures("small_pieces")
def test_a_tree_read_like_another_is_the_tree_read_afresh(
    entries: dict[str, tuple[bool, bytes]], edits: list[tuple[bool, str, bool, bytes]]
) -> None:
    """Reading a tree with a similar one as a hint (another process changed a few entries) gives the
    same entries and bytes as reading it afresh, and reuses the hint's pieces that did not change."""
    editor = TreeEditor(EMPTY_TREE)
    for name, (is_folder, oid) in entries.items():
        editor.insert(name.encode(), MODE_TREE if is_folder else MODE_BLOB, oid)
    old = editor.tree()
    editor = TreeEditor(Tree.parse(old.body()))  # another process's edits, on its own pieces
    for insert, name, is_folder, oid in edits:
        if insert:
            editor.insert(name.encode(), MODE_TREE if is_folder else MODE_BLOB, oid)
        else:
            editor.remove(name.encode())
    body = editor.tree().body()
    hinted, fresh = Tree.parse(body, like=old), Tree.parse(body)
    assert hinted.body() == body and len(hinted) == len(fresh)
    assert [hinted.get(name.encode()) for name in NAME_LIST] == [fresh.get(name.encode()) for name in NAME_LIST]
    assert all(piece.keys for piece in hinted.pieces)
    assert list(hinted.firsts) == [piece.keys[0] for piece in hinted.pieces]
    if not edits:
        assert hinted.pieces == old.pieces  # nothing parsed again


@given(st.binary(max_size=300), st.binary(max_size=300))
def test_adler32_combines_as_zlibs(first: bytes, second: bytes) -> None:
    assert adler32_combine(zlib.adler32(first), zlib.adler32(second), len(second)) == zlib.adler32(first + second)


def test_commit_bodies_match_libgit2(bare: pygit2.Repository) -> None:
    tree = bare.TreeBuilder().write()
    author = pygit2.Signature("task_1", "task_1@task.gitmem", 1767225600, 0)
    committer = pygit2.Signature("gitmem", "gitmem@localhost", 1767225600, 0)
    root = bare.create_commit(None, author, committer, "created /a.md\n\nMemory-Id: m\n", tree, [])
    child = bare.create_commit(None, author, committer, "modified /a.md\n\nMemory-Id: m\n", tree, [root])
    for oid in (root, child):
        commit = commit_of(bare[oid])
        body = commit_body(tree.raw, [p.raw for p in commit.parent_ids], author, committer, commit.message)
        assert object_id(b"commit", body).hex() == str(oid)


def test_a_written_pack_verifies_and_reads_back(tmp_path: Path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "repo.git"), bare=True)
    blobs = [b"", b"x", b"note\n" * 1000, bytes(range(256)) * 70]
    objects = [PackObject(b"blob", body, object_id(b"blob", body)) for body in blobs]
    editor = TreeEditor(EMPTY_TREE)
    for i, obj in enumerate(objects):
        editor.insert(f"n{i}".encode(), MODE_BLOB, obj.oid)
    tree_body = editor.tree().body()
    objects.append(PackObject(b"tree", tree_body, object_id(b"tree", tree_body)))
    pack = write_pack(tmp_path / "repo.git" / "objects", objects + objects[:1], durability=DURABLE)
    verify = subprocess.run(["git", "verify-pack", "-v", str(pack.with_suffix(".idx"))], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr
    assert f"non delta: {len(objects)} objects" in verify.stdout
    for obj in objects:
        assert repo[obj.oid.hex()].read_raw() == obj.body
    assert not list((tmp_path / "repo.git" / "objects" / "pack").glob("tmp_*"))


def test_a_big_tree_is_packed_from_its_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree of many pieces goes into the pack as its pieces' compressed bytes joined: Git verifies the
    pack and reads the tree back, each version whole (they are in separate packs, as single writes)."""
    monkeypatch.setattr(trees, "PIECE_ENTRIES", 16)
    repo = pygit2.init_repository(str(tmp_path / "repo.git"), bare=True)
    cache = TreeCache()
    root = None
    for step in range(3):
        store = TreeStore(cache, lambda oid: repo[oid.hex()].read_raw())
        changes = {f"notes/n-{i:03d}.md": object_id(b"blob", b"%d-%d" % (step, i)) for i in range(step, 200, 3)}
        root = store.edit(root, changes)
        objects = store.pack_objects()
        big = [obj for obj in objects if obj.compressed is not None]
        assert len(big) == 1 and len(big[0].compressed or ()) >= 3 + 3  # the folder, pieces and frame
        pack = write_pack(tmp_path / "repo.git" / "objects", objects, durability=NOT_FLUSHED)
        verify = subprocess.run(["git", "verify-pack", str(pack.with_suffix(".idx"))], capture_output=True, text=True)
        assert verify.returncode == 0, verify.stderr
        for obj in objects:
            assert repo[obj.oid.hex()].read_raw() == obj.body
            cache.put(obj.oid, store.new[obj.oid])
    assert root is not None
    assert len(repo[root.hex()] / "notes") == 200  # type: ignore[operator]


def test_a_folders_next_version_is_stored_as_a_delta(tmp_path: Path) -> None:
    """A big folder changed by one entry is a delta against its previous version (the delta copies the
    common start and end: two changes far apart, as a rename within the folder, are stored whole)."""
    repo = pygit2.init_repository(str(tmp_path / "repo.git"), bare=True)
    editor = TreeEditor(EMPTY_TREE)
    for i in range(300):
        editor.insert(f"note-{i:04d}.md".encode(), MODE_BLOB, object_id(b"blob", str(i).encode()))
    versions = [editor.tree()]
    for change in (b"note-0150.mdx", b"a-first.md", b"zz-last.md"):
        editor = TreeEditor(versions[-1])
        editor.insert(change, MODE_BLOB, object_id(b"blob", change))
        versions.append(editor.tree())
    objects, previous = [], None
    for tree in versions:
        oid = object_id(b"tree", tree.body())
        objects.append(PackObject(b"tree", tree.body(), oid, delta_base=previous))
        previous = oid
    pack = write_pack(tmp_path / "repo.git" / "objects", objects, durability=NOT_FLUSHED)
    verify = subprocess.run(["git", "verify-pack", "-v", str(pack.with_suffix(".idx"))], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr
    assert "non delta: 1 object" in verify.stdout and f"chain length = {len(versions) - 1}" in verify.stdout
    assert pack.stat().st_size < len(versions[0].body())  # four versions in less than one's size
    for obj in objects:
        assert repo[obj.oid.hex()].read_raw() == obj.body
