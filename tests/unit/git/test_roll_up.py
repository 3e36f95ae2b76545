"""Rolling small packs up (gitmem.git.pack.roll_up): the same packs as ``git repack --geometric=2`` roll up,
every object stays readable, loose objects are packed, kept and cruft packs are left alone."""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import pygit2
import pytest

from gitmem.durable import NOT_FLUSHED
from gitmem.git.pack import roll_up as roll_up_module
from gitmem.git.pack.format import PackObject, index_object_ids, write_pack
from gitmem.git.pack.roll_up import Pack, geometric_split, remove_packs, roll_up, rollable_packs
from gitmem.git.pack.roll_up import object_names as roll_up_names
from gitmem.git.trees import object_id
from tests.checks import assert_fsck_clean, git


def _git(repo: Path, *args: str, input: bytes) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True, check=True)
    return proc.stdout.decode()


def _blob(text: str) -> PackObject:
    body = text.encode()
    return PackObject(b"blob", body, object_id(b"blob", body))


def _repository(path: Path, counts: tuple[int, ...]) -> tuple[Path, set[str]]:
    """A bare repository with a pack of ``counts[i]`` blobs for each i; its packs' names and blob ids."""
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    ids: set[str] = set()
    for i, count in enumerate(counts):
        blobs = [_blob(f"pack {i} blob {j}") for j in range(count)]
        write_pack(path / "objects", blobs, durability=NOT_FLUSHED)
        ids |= {blob.oid.hex() for blob in blobs}
    return path, ids


def _pack_names(repo: Path) -> set[str]:
    return {p.name for p in (repo / "objects" / "pack").glob("pack-*.pack")}


def _readable(repo: Path, ids: set[str]) -> set[str]:
    out = _git(repo, "cat-file", "--batch-check", input="".join(f"{oid}\n" for oid in ids).encode())
    return {line.split()[0] for line in out.splitlines() if not line.endswith("missing")}


@pytest.mark.parametrize(
    "counts",
    [(1, 1, 1), (1, 1, 4, 100), (1, 2, 4, 8), (3, 3, 30, 31), (5,), (2, 9, 10, 40), (1, 1, 1, 1, 1, 1, 50, 60)],
)
def test_the_packs_rolled_up_are_the_ones_git_rolls_up(tmp_path: Path, counts: tuple[int, ...]) -> None:
    ours, ids = _repository(tmp_path / "ours.git", counts)
    theirs = tmp_path / "theirs.git"
    shutil.copytree(ours, theirs)
    before = _pack_names(ours)
    git(theirs, "repack", "-d", "-q", "--geometric=2")
    rolled = roll_up(ours, depth=50, fsync=True)
    kept_by_git, kept_by_us = _pack_names(theirs) & before, _pack_names(ours) & before
    assert kept_by_us == kept_by_git
    assert rolled == (kept_by_us != before)
    assert len(_pack_names(ours)) == len(_pack_names(theirs))
    assert _readable(ours, ids) == ids
    assert_fsck_clean(ours)


def test_a_pack_index_lists_what_git_reads_from_it(tmp_path: Path) -> None:
    repo, ids = _repository(tmp_path / "r.git", (7,))
    (index,) = (repo / "objects" / "pack").glob("*.idx")
    listed = _git(repo, "show-index", input=index.read_bytes())
    assert {oid.hex() for oid in index_object_ids(index)} == {line.split()[1] for line in listed.splitlines()} == ids


def test_the_split_leaves_a_geometric_progression() -> None:
    for counts in [(1, 1, 1), (1, 2, 4, 8), (2, 2, 3, 50, 51), (10, 1000), (4, 5, 6, 7, 100, 1000)]:
        packs = [Pack(Path(f"p{i}"), n) for i, n in enumerate(counts)]
        rolled = geometric_split(packs)
        rest = [p.objects for p in packs[len(rolled) :]]
        sizes = ([sum(p.objects for p in rolled)] if rolled else []) + rest
        assert all(later >= 2 * earlier for earlier, later in itertools.pairwise(sizes)), counts


def _work_tree(path: Path, files: dict[str, str]) -> Path:
    """A work tree with ``files`` committed (again, if it exists)."""
    if not path.exists():
        subprocess.run(["git", "init", "-q", str(path)], check=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    for args in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"]):
        subprocess.run(["git", "-C", str(path), *args], check=True)
    return path


def test_new_objects_are_named_as_git_names_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = _work_tree(tmp_path / "w", {"a/x.md": "x", "a/deep/z.md": "z", "b/y.md": "y"})
    _work_tree(work, {"a/deep/z.md": "z2", "c.md": "c"})
    listed = git(work, "rev-list", "--objects", "HEAD", "^HEAD^").splitlines()  # the commit, then "<id> <path>"
    ids = {bytes.fromhex(line[:40]) for line in listed}
    by_git = {bytes.fromhex(line[:40]): line[41:].encode() for line in listed if len(line) > 40}
    assert roll_up_names(work, ids) == by_git
    monkeypatch.setattr(roll_up_module, "MAX_READ_TREE_BYTES", 0)  # a big folder: named, not read
    assert roll_up_names(work, ids) == {oid: name for oid, name in by_git.items() if name == b""}


def test_only_new_commits_are_walked_and_older_trees_they_list_are_named_unread(tmp_path: Path) -> None:
    work = _work_tree(tmp_path / "w", {"a/x.md": "x", "b/y.md": "y"})
    _work_tree(work, {"a/x.md": "x2"})
    listed = git(work, "rev-list", "--objects", "HEAD").splitlines()
    ids = {bytes.fromhex(line[:40]) for line in listed}
    new = {bytes.fromhex(line[:40]) for line in git(work, "rev-list", "--objects", "HEAD", "^HEAD^").splitlines()}

    def object_at(spec: str) -> bytes:
        return bytes.fromhex(git(work, "rev-parse", spec).strip())

    names = roll_up_names(work, ids, new)
    assert names == {
        object_at("HEAD^{tree}"): b"",
        object_at("HEAD:a"): b"a",
        object_at("HEAD:a/x.md"): b"a/x.md",
        object_at("HEAD:b"): b"b",  # an older tree the new root lists: named, not read (b/y.md is not)
    }
    assert object_at("HEAD~1^{tree}") in ids and object_at("HEAD:b/y.md") in ids


def test_loose_objects_are_packed_and_kept_and_cruft_packs_stay(tmp_path: Path) -> None:
    repo, ids = _repository(tmp_path / "r.git", (1, 1))
    kept = next(iter(_pack_names(repo)))
    (repo / "objects" / "pack" / kept).with_suffix(".keep").touch()
    work = _work_tree(tmp_path / "work", {"a.md": "reachable"})
    subprocess.run(["git", "-C", str(work), "push", "-q", str(repo), "HEAD:refs/heads/main"], check=True)
    unreachable = _git(repo, "hash-object", "-w", "--stdin", input=b"waits out its grace").strip()
    git(repo, "repack", "-d", "-q", "--cruft")  # a cruft pack for the unreachable blob
    cruft = {p.with_suffix(".pack").name for p in (repo / "objects" / "pack").glob("*.mtimes")}
    assert cruft
    loose = {_git(repo, "hash-object", "-w", "--stdin", input=f"loose {i}".encode()).strip() for i in range(3)}
    assert roll_up(repo, depth=50, fsync=False)
    assert not [p for p in (repo / "objects").iterdir() if len(p.name) == 2]  # no loose object left
    assert {kept} | cruft <= _pack_names(repo)
    assert {p.path.name for p in rollable_packs(repo / "objects" / "pack")}.isdisjoint({kept} | cruft)
    assert _readable(repo, ids | loose | {unreachable}) == ids | loose | {unreachable}
    assert_fsck_clean(repo)


def test_nothing_to_roll_up_changes_nothing(tmp_path: Path) -> None:
    repo, _ = _repository(tmp_path / "r.git", (1, 4, 16))
    before = _pack_names(repo)
    assert not roll_up(repo, depth=50, fsync=False)
    assert _pack_names(repo) == before


def test_objects_that_cannot_be_named_are_rolled_up_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, ids = _repository(tmp_path / "r.git", (1, 1, 1))

    def unreadable(repo_path: Path, ids: set[bytes], new: set[bytes] | None = None) -> dict[bytes, bytes]:  # noqa: ARG001  stands in for object_names
        raise pygit2.GitError("object not found")

    monkeypatch.setattr(roll_up_module, "object_names", unreadable)
    assert roll_up(repo, depth=50, fsync=False)
    assert len(_pack_names(repo)) == 1 and _readable(repo, ids) == ids


def test_the_new_pack_is_flushed_into_its_folder_before_a_rolled_pack_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, ids = _repository(tmp_path / "r.git", (1, 1, 1))
    rolled = _pack_names(repo)
    flushed: list[set[str]] = []

    def flush(folder: Path) -> None:  # what the folder holds when its names are made durable
        flushed.append({p.name for p in folder.glob("pack-*.pack")})

    monkeypatch.setattr(roll_up_module, "fsync_dir", flush)
    assert roll_up(repo, depth=50, fsync=True)
    (new,) = _pack_names(repo)
    assert flushed == [rolled | {new}]  # once, with the new pack named and every rolled one still there
    assert _readable(repo, ids) == ids
    unflushed, _ = _repository(tmp_path / "u.git", (1, 1))
    assert roll_up(unflushed, depth=50, fsync=False) and len(flushed) == 1  # GITMEM_FSYNC=never


def test_removing_packs_takes_the_files_beside_them_and_nothing_else(tmp_path: Path) -> None:
    """A rolled-up pack goes with its index and reverse index, whichever of them it has; another
    pack, and a pack's .keep (a push's, not the packer's to drop), stay."""
    for name in ("pack-a.pack", "pack-a.idx", "pack-a.rev", "pack-a.keep", "pack-b.pack", "pack-b.idx", "pack-c.pack"):
        (tmp_path / name).write_bytes(b"x")
    remove_packs(tmp_path, [tmp_path / "pack-a.pack", tmp_path / "pack-c.pack", tmp_path / "pack-gone.pack"])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pack-a.keep", "pack-b.idx", "pack-b.pack"]
