"""Restore and diffs in the engine and the CLI: restore is an ordinary write (rules, preconditions,
conflicts); diffs read as git's; the CLI colours only a terminal."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.cli import main
from gitmem.clock import FrozenClock
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.redaction import redact
from gitmem.engine.store.diff import diff_versions, hunks
from gitmem.engine.store.restore import restore
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import ArchivedStore, InvalidRequest, NotFound, PathConflict, PreconditionFailed, TooLarge
from gitmem.model import Actor

USER = Actor("user_actor", "user_01TESTTESTTESTTESTTESTTEST")


def test_restore_a_deleted_note_brings_back_its_id_path_and_creation_time(
    store: MemoryStore, clock: FrozenClock
) -> None:
    note = store.create("/a.md", "first")
    clock.advance(hours=1)
    store.update(note.id, content="second", path="/b.md")
    store.delete(note.id)
    clock.advance(hours=1)
    back = restore(store, note.id, note.version_id, actor=USER)
    assert (back.id, back.path, back.created_at) == (note.id, "/a.md", note.created_at)
    assert store.get(note.id).content == "first"
    newest = store.versions(memory_id=note.id, limit=1).items[0]
    assert (newest.operation, newest.created_by, newest.path) == ("created", USER, "/a.md")
    assert restore(store, note.id, note.version_id).version_id == back.version_id  # already so: no new version


def test_restore_refusals_change_nothing(store: MemoryStore, gm: Gitmem, workspace: Workspace) -> None:
    note = store.create("/a.md", "first")
    other = store.create("/other.md", "x")
    store.update(note.id, content="second", path="/b.md")
    deletion = store.delete(other.id)
    tip = store.index.indexed_tip()
    with pytest.raises(PreconditionFailed):
        restore(store, note.id, note.version_id, expected_sha256="0" * 64)
    with pytest.raises(NotFound):
        restore(store, note.id, other.version_id)  # a version of another note
    with pytest.raises(InvalidRequest):
        restore(store, other.id, deletion.id)  # a deletion has no content
    store.create("/a.md", "taken")
    with pytest.raises(PathConflict):
        restore(store, note.id, note.version_id)
    assert store.index.indexed_tip() != tip  # (only the create above moved main)
    gm.archive_store(workspace.id, store.id)
    with pytest.raises(ArchivedStore):
        restore(store, other.id, other.version_id)


def test_restore_of_a_redacted_version_is_invalid(store: MemoryStore) -> None:
    note = store.create("/a.md", "first")
    store.update(note.id, content="second")
    redact(store, note.version_id)
    with pytest.raises(InvalidRequest, match="redacted"):
        restore(store, note.id, note.version_id)


def test_restore_applies_the_store_limits(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    note = store.create("/a.md", "a much longer first version")
    store.update(note.id, content="short")
    monkeypatch.setattr(store, "policy", dataclasses.replace(store.policy, max_content_bytes=10))
    with pytest.raises(TooLarge):
        restore(store, note.id, note.version_id)
    assert store.get(note.id).content == "short"


def test_hunks_match_git_conventions() -> None:
    assert hunks("", "") == ()
    (created,) = hunks("", "a\nb\n")
    assert created.header == "@@ -0,0 +1,2 @@"
    (removed,) = hunks("a\n", "")
    assert removed.header == "@@ -1 +0,0 @@"
    far = "".join(f"{i}\n" for i in range(20))
    assert [h.header for h in hunks(far, far.replace("2\n", "X\n", 1).replace("17\n", "Y\n"))] == [
        "@@ -1,6 +1,6 @@",
        "@@ -15,6 +15,6 @@",
    ]


def test_a_deletion_diffs_against_what_it_deleted(store: MemoryStore) -> None:
    note = store.create("/a.md", "gone")
    deletion = store.delete(note.id)
    diff = diff_versions(store, deletion.id)
    assert diff.unified == (
        "diff --git a/a.md b/a.md\ndeleted file\n--- a/a.md\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-gone\n\\ No newline at end of file\n"
    )


@pytest.fixture
def cli(tmp_path: Path) -> Callable[..., str]:
    runner = CliRunner()

    def invoke(*args: str, color: bool = False, input: str | None = None) -> str:
        result = runner.invoke(main, ["--home", str(tmp_path / "cli-home"), *args], input=input, color=color)
        assert result.exit_code == 0, result.output
        return result.output

    return invoke


def test_cli_search_diff_restore(cli: Callable[..., str]) -> None:
    store = cli("store", "create", "team").strip()
    first = cli("note", "put", store, "/people/sam.md", input="Sam likes terraform.\n").split()
    memory_id, v1 = first[2], first[3]
    v2 = cli("note", "put", store, "/people/sam.md", input="Sam likes pulumi.\n").split()[3]

    assert "\x1b[31m\x1b[1m**pulumi**\x1b[0m" in cli("search", store, "pulumi", color=True)
    out = cli("search", store, "pulumi")
    assert out.startswith(f"/people/sam.md  {memory_id}  score ") and "    Sam likes **pulumi**." in out
    assert cli("search", store, "terraform") == ""

    plain = cli("diff", store, v2)
    assert plain.startswith(f"version {v2} (modified by service at ")
    assert f"against {v1} (created by service" in plain
    assert plain.endswith(
        "diff --git a/people/sam.md b/people/sam.md\n--- a/people/sam.md\n+++ b/people/sam.md\n"
        "@@ -1 +1 @@\n-Sam likes terraform.\n+Sam likes pulumi.\n"
    )
    assert "\x1b[" not in plain
    coloured = cli("diff", store, v1, v2, color=True)
    assert "\x1b[31m-Sam likes pulumi.\x1b[0m" in coloured and "\x1b[32m+Sam likes terraform.\x1b[0m" in coloured

    restored = cli("restore", store, memory_id, v1).split()
    assert restored[:3] == ["restored", "/people/sam.md", memory_id]
    assert "terraform" in cli("search", store, "terraform")
