"""Pushing to a store with the real git client: hooks/pre-receive checks, hooks/post-receive records.

No HTTP here: a local ``git clone <store path>`` and ``git push`` run the store's hooks as
``git http-backend`` would, with the pusher's GITMEM_* environment (the server's contract).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import random
import shutil
import string
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from gitmem import ids
from gitmem.config.handoff import checked_for
from gitmem.engine.catalog.user_emails import UserEmails
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.push import check as push_check
from gitmem.engine.push import notes as push_notes
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import NotFound
from gitmem.git.commits import VersionRecord
from gitmem.git.repository import HOOKS_DIR, NOTES_REF, read_tip
from gitmem.model import Actor, Version
from tests.checks import listed_notes
from tests.git_client import client_environment

API = Actor("api_actor", "apikey_01TESTTESTTESTTESTTESTTEST")


class Pusher:
    """A person with a plain clone of a store, pushing as a gitmem user."""

    def __init__(self, gm: Gitmem, workspace_id: str, store_id: str, user_id: str, root: Path) -> None:
        self.gm = gm
        self.workspace_id = workspace_id
        self.store_id = store_id
        self.user_id = user_id
        self.repo_path = gm.repo_path(store_id)
        self.dir = root / f"clone-{store_id}"
        self.env = client_environment(*push_check.pusher_identity(user_id, gm.catalog.credential(user_id).name))
        self.env.update(
            {
                # what the server passes to git http-backend for a push
                "GITMEM_PYTHON": sys.executable,
                "GITMEM_HOME": str(gm.home),
                "GITMEM_STORE_ID": store_id,
                "GITMEM_USER_ID": user_id,
                "GITMEM_ACCESS": "read_write",
                "GITMEM_FSYNC": "never",
            }
        )
        self.env.update(checked_for(self.env))  # as the server hands its checked settings to the hooks
        self.git("clone", "-q", str(self.repo_path), str(self.dir), cwd=root)
        self.git("checkout", "-q", "-B", "main")

    @property
    def store(self) -> MemoryStore:
        return self.gm.store(self.workspace_id, self.store_id)

    def git(
        self,
        *args: str,
        cwd: Path | None = None,
        check: bool = True,
        env: dict[str, str] | None = None,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["git", *args],
            cwd=cwd or self.dir,
            env={**self.env, **(env or {})},
            input=input,
            capture_output=True,
            text=True,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    def write(self, path: str, content: str | bytes) -> None:
        target = self.dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")

    def move(self, old: str, new: str) -> None:
        (self.dir / new).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", old, new)

    def commit(self, message: str = "edit notes") -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD").stdout.strip()

    def push(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return self.git("push", "origin", *(args or ("main",)), check=False, env=env)


@pytest.fixture
def gm(tmp_path: Path) -> Gitmem:
    return Gitmem.open(tmp_path / "home", fsync="never")


@pytest.fixture
def world(gm: Gitmem, tmp_path: Path) -> Pusher:
    ws = gm.catalog.create_workspace("acme")
    user, _token = gm.catalog.create_user(ws.id, "sam")
    info = gm.create_store(ws.id, "team notes")
    store = gm.store(ws.id, info.id)
    store.create("/people/sam.md", "Sam likes tea.\n", actor=API)
    store.create("/projects/acme.md", "Acme launches in May.\n", actor=API)
    pusher = Pusher(gm, ws.id, info.id, user.id, tmp_path)
    return pusher


def _snapshot(store: MemoryStore) -> list[tuple[object, ...]]:
    versions: list[Version] = []
    page = None
    while True:
        result = store.versions(limit=100, page=page)
        versions += result.items
        page = result.next_page
        if page is None:
            break
    return [
        (
            v.id,
            v.memory_id,
            v.operation,
            v.path,
            v.created_by,
            v.created_at,
            v.content_sha256,
            v.content_size_bytes,
            v.commit_id,
        )
        for v in versions
    ]


def _spool(pusher: Pusher) -> list[Path]:
    return sorted((pusher.repo_path / "gitmem" / "pushes").glob("*"))


def test_the_store_uses_the_project_hooks(world: Pusher) -> None:
    repo = pygit2.Repository(str(world.repo_path))
    assert repo.config["core.hooksPath"] == str(HOOKS_DIR)
    for name in ("pre-receive", "post-receive"):
        assert os.access(HOOKS_DIR / name, os.X_OK)


def test_a_pushed_edit_is_a_version_by_the_user(world: Pusher) -> None:
    note = world.store.get_by_path("/people/sam.md")
    world.write("people/sam.md", "Sam likes green tea.\n")
    commit = world.commit("sam: green tea")
    result = world.push()
    assert result.returncode == 0, result.stderr

    store = world.store
    latest = store.versions(limit=1, with_content=True).items[0]
    assert latest.operation == "modified"
    assert latest.memory_id == note.id
    assert latest.created_by == Actor("user_actor", world.user_id)
    assert latest.content == "Sam likes green tea.\n"
    assert latest.path == "/people/sam.md"
    assert latest.commit_id == commit
    assert latest.id == ids.derived_id(ids.VERSION, commit, "/people/sam.md")
    assert store.get_by_path("/people/sam.md").content == "Sam likes green tea.\n"
    assert store.versions(user_id=world.user_id).items == [store.version(latest.id, with_content=False)]
    # the pushed commit keeps its id, and its record is a Git note; the spool is gone
    repo = pygit2.Repository(str(world.repo_path))
    assert str(read_tip(repo)) == commit
    recorded = json.loads(repo.lookup_note(commit, NOTES_REF).message)
    assert recorded["user_id"] == world.user_id
    assert recorded["versions"][0]["version_id"] == latest.id
    assert f".{latest.created_at.microsecond:06d}" in recorded["created_at"]
    assert _spool(world) == []


def test_several_commits_and_changes_in_one_push(world: Pusher) -> None:
    world.write("people/ana.md", "Ana writes Rust.\n")
    world.write("people/sam.md", "Sam likes coffee now.\n")
    first = world.commit("two changes")
    world.write("ideas/x.md", "An idea.\n")
    second = world.commit("one more")
    assert world.push().returncode == 0

    store = world.store
    versions = store.versions(limit=10).items
    mine = [v for v in versions if v.created_by == Actor("user_actor", world.user_id)]
    assert [(v.operation, v.path, v.commit_id) for v in reversed(mine)] == [
        ("created", "/people/ana.md", first),
        ("modified", "/people/sam.md", first),
        ("created", "/ideas/x.md", second),
    ]
    assert mine[0].created_at > mine[-1].created_at  # one distinct time per commit, in order
    ana = store.get_by_path("/people/ana.md")
    assert ana.id == ids.derived_id(ids.MEMORY, first, "/people/ana.md")
    assert store.get(ana.id).content == "Ana writes Rust.\n"


def test_a_pushed_move_keeps_the_note_id(world: Pusher) -> None:
    note = world.store.get_by_path("/people/sam.md")
    world.move("people/sam.md", "team/sam.md")
    world.commit("move sam")
    assert world.push().returncode == 0

    store = world.store
    moved = store.get_by_path("/team/sam.md")
    assert moved.id == note.id
    with pytest.raises(NotFound):
        store.get_by_path("/people/sam.md")
    latest = store.versions(limit=1).items[0]
    assert (latest.operation, latest.path, latest.memory_id) == ("modified", "/team/sam.md", note.id)
    assert len(store.versions(memory_id=note.id).items) == 2  # created, then the move: no delete


def test_a_pushed_delete_is_a_deleted_version(world: Pusher) -> None:
    note = world.store.get_by_path("/projects/acme.md")
    world.git("rm", "-q", "projects/acme.md")
    world.commit("acme is done")
    assert world.push().returncode == 0

    store = world.store
    latest = store.versions(limit=1).items[0]
    assert (latest.operation, latest.memory_id, latest.path) == ("deleted", note.id, "/projects/acme.md")
    assert latest.created_by == Actor("user_actor", world.user_id)
    with pytest.raises(NotFound):
        store.get(note.id)


def test_reindex_gives_the_same_versions(world: Pusher) -> None:
    world.write("people/ana.md", "Ana.\n")
    world.commit()
    assert world.push().returncode == 0
    world.store.update(world.store.get_by_path("/people/ana.md").id, "Ana, again.\n", actor=API)
    world.git("pull", "-q", "--ff-only", "origin", "main")
    world.move("people/ana.md", "people/ana-b.md")
    world.git("rm", "-q", "projects/acme.md")
    world.commit()
    assert world.push().returncode == 0

    store = world.store
    before = _snapshot(store)
    notes_before = [(n.id, n.path, n.content_sha256) for n in listed_notes(store.list(limit=100).items)]
    store.index.rebuild()
    assert _snapshot(store) == before
    assert [(n.id, n.path, n.content_sha256) for n in listed_notes(store.list(limit=100).items)] == notes_before


def test_attribution_does_not_wait_for_post_receive(world: Pusher, tmp_path: Path) -> None:
    """An index that catches up between the ref update and post-receive reads the push spool."""
    only_pre = tmp_path / "only-pre"
    only_pre.mkdir()
    shutil.copy(HOOKS_DIR / "pre-receive", only_pre / "pre-receive")
    repo = pygit2.Repository(str(world.repo_path))
    repo.config["core.hooksPath"] = str(only_pre)
    world.write("people/sam.md", "Sam likes mate.\n")
    commit = world.commit()
    assert world.push().returncode == 0
    assert len(_spool(world)) == 1

    store = world.store
    latest = store.versions(limit=1).items[0]
    assert latest.created_by == Actor("user_actor", world.user_id)
    with pytest.raises(KeyError):
        repo.lookup_note(commit, NOTES_REF)

    # post-receive, late: writes the note from the spool, and the index agrees after a rebuild
    repo.config["core.hooksPath"] = str(HOOKS_DIR)
    env = {**world.env, "GIT_DIR": str(world.repo_path)}
    done = subprocess.run(
        [str(HOOKS_DIR / "post-receive")],
        input=f"x {commit} refs/heads/main\n",
        text=True,
        env=env,
        cwd=world.repo_path,
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr
    assert _spool(world) == []
    assert json.loads(repo.lookup_note(commit, NOTES_REF).message)["versions"][0]["version_id"] == latest.id
    before = _snapshot(store)
    store.index.rebuild()
    assert _snapshot(store) == before


# -- refusals ----------------------------------------------------------------------------------------


def _assert_refused(pusher: Pusher, result: subprocess.CompletedProcess[str], *expected: str) -> None:  # noqa: ARG001  every check of a push is given its pusher
    assert result.returncode != 0, result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


@pytest.fixture
def unchanged(world: Pusher) -> Iterator[Pusher]:
    """Asserts after the test that the store is exactly as it was."""
    repo = pygit2.Repository(str(world.repo_path))
    tip, notes_tip = read_tip(repo), repo.references.get(NOTES_REF)
    before = _snapshot(world.store)
    yield world
    repo = pygit2.Repository(str(world.repo_path))
    assert read_tip(repo) == tip
    assert repo.references.get(NOTES_REF) == notes_tip
    assert _snapshot(world.store) == before
    assert _spool(world) == []


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"people/cafe\u0301.md": "x"}, "Normalization Form C"),
        ({"/".join(["d"] * 21) + ".md": "x"}, "more than 20 segments"),
        ({"people/big.md": "x" * 102_401}, "at most 102400"),
        (
            {
                "people/key.md": "-----BEGIN RSA PRIVATE KEY-----\nMIIEkMekS0CEEMHT2Yat0ML8xMxd\n"
                "VmmCOIkbt5xGn2wMnRUGV2RTZJdh\n"
            },
            "private key",
        ),
        ({"people/pw.md": "db password: hunter2hunter2\n"}, "saved password"),
        ({"people/bin.md": b"\xff\xfe\x00binary"}, "not UTF-8"),
        ({".gitattributes": "*.md filter=x\n"}, "'.gitattributes' is a name Git reserves"),
        ({".gitmodules": "x\n"}, "'.gitmodules' is a name Git reserves"),
    ],
)
def test_a_change_breaking_a_rule_is_refused(unchanged: Pusher, files: dict[str, str | bytes], expected: str) -> None:
    for path, content in files.items():
        unchanged.write(path, content)
    commit = unchanged.commit()
    result = unchanged.push()
    _assert_refused(unchanged, result, f"remote: gitmem: refused: {commit[:7]} /", expected)


def test_a_symlink_is_refused(unchanged: Pusher) -> None:
    (unchanged.dir / "people" / "link.md").symlink_to("sam.md")
    commit = unchanged.commit()
    _assert_refused(unchanged, unchanged.push(), f"refused: {commit[:7]} /people/link.md: symbolic links")


def test_an_executable_file_is_refused(unchanged: Pusher) -> None:
    unchanged.write("people/run.md", "#!/bin/sh\n")
    (unchanged.dir / "people" / "run.md").chmod(0o755)
    unchanged.commit()
    _assert_refused(unchanged, unchanged.push(), "/people/run.md: the file is executable")


def test_a_submodule_is_refused(unchanged: Pusher) -> None:
    blob = unchanged.git("rev-parse", "HEAD").stdout.strip()
    unchanged.git("update-index", "--add", "--cacheinfo", f"160000,{blob},vendor")
    unchanged.git("commit", "-q", "-m", "a gitlink")
    _assert_refused(unchanged, unchanged.push(), "/vendor: submodules are refused")


def _push_tree(pusher: Pusher, tree_lines: str) -> subprocess.CompletedProcess[str]:
    made = pusher.git("mktree", input=tree_lines).stdout.strip()
    commit = pusher.git("commit-tree", made, "-p", "HEAD", "-m", "crafted").stdout.strip()
    pusher.git("update-ref", "refs/heads/main", commit)
    return pusher.push()


def test_a_collision_in_the_pushed_tree_is_refused(unchanged: Pusher) -> None:
    blob = unchanged.git("hash-object", "-w", "--stdin", input="a note\n").stdout.strip()
    inner = unchanged.git("mktree", input=f"100644 blob {blob}\tb.md\n").stdout.strip()
    lines = f"100644 blob {blob}\tpeople\n040000 tree {inner}\tpeople\n"
    # Git's own fsck (receive.fsckObjects, set on every store) refuses the tree first ...
    _assert_refused(unchanged, _push_tree(unchanged, lines), "duplicateEntries")
    # ... and without it the hook does: a note at /people and another below it
    pygit2.Repository(str(unchanged.repo_path)).config["receive.fsckObjects"] = False
    _assert_refused(unchanged, unchanged.push(), "refused:", "/people: two entries share this name")


def test_a_note_under_another_note_is_refused() -> None:
    """The collision rule against the store's notes, checked on the state the push would make: a
    pushed note that would displace another (at, above or below its path) is a collision."""
    from gitmem.engine.push.check import NoteState

    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def created(path: str) -> VersionRecord:
        return VersionRecord("mem_new" + path, "memver" + path, "created", path, None, 1, None, when, when)

    def clashes(path: str) -> list[str]:
        state = NoteState(iter([("/a", "mem_1", 1), ("/b/c", "mem_2", 1)]))
        step = state.apply(created(path))
        assert step is not None
        return [other.path for other in step.displaced]

    assert clashes("/a/x") == ["/a"]
    assert clashes("/b") == ["/b/c"]
    assert clashes("/c") == []


# A GitHub token's shape with seeded random letters: generated, never a real one.
_TOKEN = "ghp_" + "".join(random.Random(28).choices(string.ascii_letters + string.digits, k=36))


@pytest.mark.parametrize(
    ("file_name", "message"),
    [(f"people/{_TOKEN}.md", "add a note"), (f"{_TOKEN}/sam.md", "add a note"), ("people/ok.md", f"use {_TOKEN}")],
    ids=["file name", "folder name", "commit message"],
)
def test_a_secret_in_a_pushed_name_or_message_is_refused(unchanged: Pusher, file_name: str, message: str) -> None:
    unchanged.write(file_name, "plain text\n")
    commit = unchanged.commit(message)
    result = unchanged.push()
    _assert_refused(unchanged, result, f"remote: gitmem: refused: {commit[:7]}", "appears to hold", "GitHub token")
    assert _TOKEN not in result.stderr  # the refusal never repeats it


def test_commits_that_borrow_gitmem_trailers_or_identities_are_refused(unchanged: Pusher) -> None:
    unchanged.write("people/sam.md", "forged\n")
    unchanged.git("add", "-A")
    unchanged.git(
        "commit",
        "-q",
        "-m",
        "modified /people/sam.md\n\nMemory-Id: mem_x\nMemory-Version: memver_x\n"
        "Memory-Operation: modified\nCreated-By: task_actor task_id=task_x\n"
        "Created-At: 2026-01-01T00:00:00Z",
    )
    _assert_refused(unchanged, unchanged.push(), "carries gitmem's version trailers")
    unchanged.git("reset", "-q", "--hard", "origin/main")
    unchanged.write("people/sam.md", "forged\n")
    unchanged.git("add", "-A")
    unchanged.git(
        "commit", "-q", "-m", "x", env={"GIT_AUTHOR_NAME": "task_x", "GIT_AUTHOR_EMAIL": "task_x@task.gitmem"}
    )
    _assert_refused(unchanged, unchanged.push(), "the author task_x <task_x@task.gitmem> is not you, the pusher")


@pytest.mark.parametrize(
    ("role", "name", "email"),
    [
        ("author", "gitmem", "gitmem@example.com"),  # the red team's forgery: a free name and e-mail
        ("author", "gitmem", None),  # the pusher's own e-mail under another name
        ("author", None, "someone@example.com"),  # the pusher's name with another e-mail
        ("committer", "Mallory", "mallory@example.com"),
    ],
)
def test_a_commit_must_name_its_pusher_as_author_and_committer(
    world: Pusher, role: str, name: str | None, email: str | None
) -> None:
    prefix = "GIT_AUTHOR" if role == "author" else "GIT_COMMITTER"
    env = {}
    if name is not None:
        env[f"{prefix}_NAME"] = name
    if email is not None:
        env[f"{prefix}_EMAIL"] = email
    before = world.git("ls-remote", "origin", "main").stdout
    world.write("people/sam.md", "forged\n")
    world.git("add", "-A")
    world.git("commit", "-q", "-m", "x", env=env)
    result = world.push()
    _assert_refused(
        world,
        result,
        "remote: gitmem: refused:",
        f"the {role} ",
        "is not you, the pusher",
        f"<{world.user_id}@user.gitmem>",
    )
    assert world.git("ls-remote", "origin", "main").stdout == before
    # As the pusher, the same change lands and git log tells who made it.
    world.git("commit", "-q", "--amend", "--no-edit", "--reset-author")
    assert world.push().returncode == 0
    log = world.git("log", "-1", "--format=%an <%ae> / %cn <%ce>").stdout.strip()
    assert log == f"sam <{world.user_id}@user.gitmem> / sam <{world.user_id}@user.gitmem>"


def test_a_registered_address_pushes_as_its_user_under_any_name(world: Pusher) -> None:
    as_sam = {
        "GIT_AUTHOR_NAME": "Sam Doe",
        "GIT_AUTHOR_EMAIL": "Sam@Example.com",
        "GIT_COMMITTER_NAME": "Sam Doe",
        "GIT_COMMITTER_EMAIL": "sam@example.com",
    }
    world.write("people/sam.md", "Sam likes coffee now.\n")
    world.git("add", "-A")
    world.git("commit", "-q", "-m", "coffee", env=as_sam)
    refused = world.push()  # not registered yet: the refusal says how to make it theirs
    _assert_refused(world, refused, "is not you, the pusher", "If Sam@Example.com is your address, register it")
    assert f"gitmem users emails add {world.user_id} Sam@Example.com" in refused.stderr
    UserEmails(world.gm.catalog).add(world.user_id, "sam@example.com")
    assert world.push().returncode == 0
    newest = world.store.versions(limit=1).items[0]
    assert newest.created_by == Actor("user_actor", world.user_id)


def test_one_bad_commit_refuses_the_whole_push(unchanged: Pusher) -> None:
    unchanged.write("people/fine.md", "fine\n")
    unchanged.commit("fine")
    unchanged.write("people/token.md", "token: AKIAABCDEFGHIJKLMNOP\n")
    bad = unchanged.commit("bad")
    _assert_refused(
        unchanged,
        unchanged.push(),
        f"refused: {bad[:7]} /people/token.md",
        "access token",
        "the store is unchanged; fix those commits",
    )


def test_a_force_push_is_refused(unchanged: Pusher) -> None:
    unchanged.write("people/sam.md", "rewritten\n")
    unchanged.git("add", "-A")
    unchanged.git("commit", "-q", "--amend", "-m", "rewrite history")
    _assert_refused(unchanged, unchanged.push("--force", "main"), "non-fast-forward pushes are refused")


def test_deleting_main_is_refused(unchanged: Pusher) -> None:
    _assert_refused(unchanged, unchanged.push(":main"), "main cannot be deleted")


def test_other_refs_are_refused(unchanged: Pusher) -> None:
    unchanged.git("tag", "v1")
    _assert_refused(unchanged, unchanged.push("v1"), "only refs/heads/main may be pushed (not refs/tags/v1)")
    unchanged.git("notes", "--ref=gitmem", "add", "-m", '{"user_id": "user_forged"}', "HEAD")
    _assert_refused(unchanged, unchanged.push("refs/notes/gitmem"), "not refs/notes/gitmem")


def test_a_merge_is_refused(unchanged: Pusher) -> None:
    unchanged.git("checkout", "-q", "-b", "side")
    unchanged.write("side.md", "side\n")
    unchanged.commit("side")
    unchanged.git("checkout", "-q", "main")
    unchanged.write("main.md", "main\n")
    unchanged.commit("main")
    unchanged.git("merge", "-q", "--no-edit", "side")
    _assert_refused(unchanged, unchanged.push(), "merge commits are refused")


def test_read_only_access_is_refused(unchanged: Pusher) -> None:
    unchanged.write("people/sam.md", "edit\n")
    unchanged.commit()
    result = unchanged.push(env={"GITMEM_ACCESS": "read_only"})
    _assert_refused(
        unchanged, result, "remote: gitmem: refused: this credential may read this memory store but not push to it"
    )


def test_a_push_without_a_gitmem_user_is_refused(unchanged: Pusher) -> None:
    unchanged.write("people/sam.md", "edit\n")
    unchanged.commit()
    env = {k: v for k, v in unchanged.env.items() if k != "GITMEM_USER_ID"}
    result = subprocess.run(
        ["git", "push", "origin", "main"], cwd=unchanged.dir, env=env, capture_output=True, text=True
    )
    _assert_refused(unchanged, result, "pushes are attributed to a gitmem user")
    result = unchanged.push(env={"GITMEM_USER_ID": "user_01NOBODYNOBODYNOBODYNOBODY"})
    _assert_refused(unchanged, result, "is not a user of this store's workspace")


def test_a_revoked_user_is_refused(unchanged: Pusher) -> None:
    unchanged.gm.catalog.revoke_user(unchanged.user_id)
    unchanged.write("people/sam.md", "edit\n")
    unchanged.commit()
    _assert_refused(unchanged, unchanged.push(), "is revoked")


def test_an_archived_store_refuses_changes_but_not_deletions(world: Pusher) -> None:
    world.gm.archive_store(world.workspace_id, world.store_id)
    tip = read_tip(pygit2.Repository(str(world.repo_path)))
    world.write("people/sam.md", "edit\n")
    world.commit()
    _assert_refused(world, world.push(), "/people/sam.md: memory store", "is archived")
    assert read_tip(pygit2.Repository(str(world.repo_path))) == tip

    world.git("reset", "-q", "--hard", "origin/main")
    world.git("rm", "-q", "projects/acme.md")
    world.commit("clean up")
    assert world.push().returncode == 0  # section 5: deleting a memory of an archived store is allowed
    assert world.store.versions(limit=1).items[0].operation == "deleted"


def test_a_bank_applies_the_bank_rules(gm: Gitmem, tmp_path: Path) -> None:
    ws = gm.catalog.create_workspace("banks")
    user, _ = gm.catalog.create_user(ws.id, "ana")
    info = gm.create_store(ws.id, "ana's bank", kind="bank")
    gm.store(ws.id, info.id).create("/projects/acme.md", "Acme.\n", actor=API)
    pusher = Pusher(gm, ws.id, info.id, user.id, tmp_path)

    pusher.write("projects/My Notes.md", "spaces are not allowed in a bank\n")
    pusher.commit()
    _assert_refused(pusher, pusher.push(), "/projects/My Notes.md", "only A-Z a-z 0-9 . _ - / are allowed")
    pusher.git("reset", "-q", "--hard", "origin/main")

    pusher.write("projects/big.md", "x" * (64 * 1024 + 1))
    pusher.commit()
    _assert_refused(pusher, pusher.push(), "at most 65536")
    pusher.git("reset", "-q", "--hard", "origin/main")

    for i in range(100):
        pusher.write(f"many/n{i:03}.md", f"note {i}\n")
    pusher.commit()
    _assert_refused(pusher, pusher.push(), "a store holds at most 100 notes", "101 notes")
    pusher.git("reset", "-q", "--hard", "origin/main")

    pusher.write("projects/ok.md", "A fine bank note.\n")
    pusher.commit()
    assert pusher.push().returncode == 0
    assert pusher.store.get_by_path("/projects/ok.md").content == "A fine bank note.\n"


def test_stale_spools_are_settled(world: Pusher) -> None:
    repo = pygit2.Repository(str(world.repo_path))
    folder = world.repo_path / "gitmem" / "pushes"
    folder.mkdir(parents=True, exist_ok=True)
    never = folder / ("f" * 40 + ".json")
    never.write_text(json.dumps({"new": "f" * 40, "commits": ["f" * 40], "records": {}}))
    assert push_notes.settle_spool(repo, stale_after=3600) == 0  # a push that may still be under way
    assert never.exists()
    assert push_notes.settle_spool(repo, stale_after=0) == 1  # one that never landed
    assert not never.exists()


def test_the_first_push_to_an_empty_store(gm: Gitmem, tmp_path: Path) -> None:
    ws = gm.catalog.create_workspace("fresh")
    user, _ = gm.catalog.create_user(ws.id, "sam")
    info = gm.create_store(ws.id, "empty")
    pusher = Pusher(gm, ws.id, info.id, user.id, tmp_path)
    pusher.write("hello.md", "The first note.\n")
    commit = pusher.commit("first")
    result = pusher.push()
    assert result.returncode == 0, result.stderr
    note = pusher.store.get_by_path("/hello.md")
    assert note.id == ids.derived_id(ids.MEMORY, commit, "/hello.md")
    assert pusher.store.version(note.version_id).created_by == Actor("user_actor", user.id)


def test_an_encrypted_store_takes_pushes_from_a_keyed_clone(gm: Gitmem, tmp_path: Path) -> None:
    from gitmem.crypto.master_key import export_key
    from gitmem.git.crypt_filter import configure_clone

    ws = gm.catalog.create_workspace("secret")
    user, _ = gm.catalog.create_user(ws.id, "sam")
    info = gm.create_store(ws.id, "encrypted", encrypted=True)
    gm.store(ws.id, info.id).create("/a.md", "alpha\n", actor=API)
    (tmp_path / "plain").mkdir()
    (tmp_path / "keyed").mkdir()
    plain = Pusher(gm, ws.id, info.id, user.id, tmp_path / "plain")  # no key: its files are ciphertext
    keyed = Pusher(gm, ws.id, info.id, user.id, tmp_path / "keyed")
    configure_clone(keyed.dir, export_key(gm.keyring.current(info.id)), info.id)
    assert (keyed.dir / "a.md").read_text() == "alpha\n"
    keyed.write("b.md", "beta from a keyed clone\n")
    keyed.commit()
    result = keyed.push()
    assert result.returncode == 0, result.stderr
    store = gm.store(ws.id, info.id)
    note = store.get_by_path("/b.md")
    assert note.content == "beta from a keyed clone\n"
    version = store.version(note.version_id)
    assert version.content_sha256 == hashlib.sha256(b"beta from a keyed clone\n").hexdigest()
    assert version.created_by == Actor("user_actor", user.id)
    before = _snapshot(store)
    store.index.rebuild()
    assert _snapshot(store) == before

    plain.git("pull", "-q", "--ff-only", "origin", "main")
    plain.write("c.md", "plaintext\n")
    plain.commit()
    _assert_refused(plain, plain.push(), "/c.md: the content is not encrypted with this store's key")


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("People/sam2.md", "differs only in case from /people"),
        ("projects/ACME.md", "differs only in case from /projects/acme.md"),
        ("notes/a\\b.md", "which some systems read as a path separator"),
        ("notes/a\uff0fb.md", "which some systems read as a path separator"),
    ],
)
def test_case_twins_and_separator_lookalikes_are_refused_by_push(unchanged: Pusher, path: str, reason: str) -> None:
    unchanged.write(path, "twin\n")
    unchanged.commit()
    _assert_refused(unchanged, unchanged.push(), "refused:", reason)


def test_a_push_may_change_the_case_of_a_path_by_moving_it(world: Pusher) -> None:
    world.move("projects/acme.md", "projects/Acme.md")
    world.commit()
    assert world.push().returncode == 0
    assert {n.path for n in world.store.list(limit=100, depth=0).items} == {"/people/sam.md", "/projects/Acme.md"}


def _importing_python(tmp_path: Path) -> tuple[str, Path]:
    """An interpreter for the hooks that logs what each run imports (``-X importtime``) to a file."""
    log = tmp_path / "imports.log"
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} -X importtime "$@" 2>>{log}\n')
    script.chmod(0o755)
    return str(script), log


def test_the_hooks_run_on_the_settings_the_server_checked(world: Pusher, tmp_path: Path) -> None:
    python, imports = _importing_python(tmp_path)
    world.write("people/sam.md", "Sam likes green tea.\n")
    world.commit()
    assert world.push(env={"GITMEM_PYTHON": python}).returncode == 0
    assert world.store.get_by_path("/people/sam.md").content == "Sam likes green tea.\n"
    log = imports.read_text()
    assert log.count("gitmem.engine.push.receive") == 2  # both hooks ran
    assert "pydantic" not in log  # neither loaded the settings object: they were handed down checked
    assert "click" not in log  # nor the command-line framework (gitmem/__main__.py runs them directly)
    # No webhook listens to this workspace: post-receive tells no outbox, so it never opens the home,
    # and, checking nothing, it loads none of the checks' rules (pre-receive alone does).
    assert "gitmem.engine.gitmem\n" not in log and "gitmem.webhooks.outbox" not in log
    assert log.count("gitmem.rules.filters\n") == 1 and log.count("gitmem.engine.push.check\n") == 1
    tables = {row[0] for row in world.gm.catalog.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "webhook_outbox" not in tables  # opening the home's outbox would have made its tables


def test_without_checked_settings_a_hook_checks_them_and_refuses_on_a_bad_one(world: Pusher) -> None:
    world.env.pop("GITMEM_CHECKED")
    before = read_tip(pygit2.Repository(str(world.repo_path)))
    world.write("people/sam.md", "Sam likes green tea.\n")
    world.commit()
    refused = world.push(env={"GITMEM_FSYNC": "sometimes"})
    assert refused.returncode != 0
    assert "GITMEM_FSYNC" in refused.stderr and "the store is unchanged" in refused.stderr
    assert read_tip(pygit2.Repository(str(world.repo_path))) == before
    assert world.push().returncode == 0  # a good environment goes through
