"""Profiles and their memory banks through the engine (the profile-bank API): ownership, every bank rule and cap,
the created/changed flags, the system-prompt section, deletion, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.agents.prompt import HEADING, render_section
from gitmem.banks.profiles import Bank, Profile, profiles_for, require_user
from gitmem.cli import main as cli
from gitmem.crypto.master_key import export_key
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.errors import InvalidRequest, LimitExceeded, NotFound, PathConflict, PermissionDenied, TooLarge
from gitmem.model import Actor
from tests.checks import store_state

KIB = 1024
MIB = 1024 * 1024


@pytest.fixture
def user(gm: Gitmem, workspace: Workspace) -> str:
    cred, _token = gm.catalog.create_user(workspace.id, "sam")
    return cred.id


@pytest.fixture
def profile(gm: Gitmem, workspace: Workspace, user: str) -> Profile:
    return profiles_for(gm).create(workspace.id, user, "research")


@pytest.fixture
def bank(gm: Gitmem, profile: Profile) -> Bank:
    return profiles_for(gm).bank(profile)


def actor(user: str) -> Actor:
    return Actor("user_actor", user)


# -- profiles ------------------------------------------------------------------------------------------


def test_a_profile_has_its_own_encrypted_bank(gm: Gitmem, workspace: Workspace, user: str, profile: Profile) -> None:
    info = gm.get_store(workspace.id, profile.bank_store_id)
    assert info.kind == "bank" and info.encrypted
    assert gm.keyring.has(profile.bank_store_id)
    assert gm.repo_path(profile.bank_store_id).is_dir()
    other = profiles_for(gm).create(workspace.id, user, "reporting")
    assert other.bank_store_id != profile.bank_store_id
    assert gm.keyring.current(other.bank_store_id).key_id != gm.keyring.current(profile.bank_store_id).key_id
    # Banks are not memory stores of the workspace.
    assert profile.bank_store_id not in {s.id for s in gm.list_stores(workspace.id, limit=100).items}
    assert [p.id for p in profiles_for(gm).list(workspace.id, user)] == [profile.id, other.id]


def test_profiles_belong_to_their_user(gm: Gitmem, workspace: Workspace, profile: Profile) -> None:
    stranger, _ = gm.catalog.create_user(workspace.id, "alex")
    with pytest.raises(NotFound):
        profiles_for(gm).get(workspace.id, stranger.id, profile.id)
    with pytest.raises(NotFound):
        profiles_for(gm).delete(workspace.id, stranger.id, profile.id)
    assert profiles_for(gm).list(workspace.id, stranger.id) == []
    elsewhere = gm.catalog.create_workspace("elsewhere")
    with pytest.raises(NotFound):
        profiles_for(gm).get(elsewhere.id, profile.user_id, profile.id)


def test_only_users_own_profiles(gm: Gitmem, workspace: Workspace) -> None:
    key, secret = gm.catalog.create_api_key(workspace.id, "robot")
    with pytest.raises(PermissionDenied, match="user"):
        require_user(gm.catalog.authenticate(secret))
    with pytest.raises(NotFound):
        profiles_for(gm).create(workspace.id, key.id, "not a user")


@pytest.mark.parametrize("name", ["", "x" * 256, "bad\nname"])
def test_profile_names(gm: Gitmem, workspace: Workspace, user: str, name: str) -> None:
    with pytest.raises(InvalidRequest):
        profiles_for(gm).create(workspace.id, user, name)


# -- bank rules -----------------------------------------------------------------------------------------


GOOD_PATHS = [
    "preferences.md",
    "projects/acme.md",
    "a/b/c/d/e.md",
    "A-Z_0.9/x-y_z.txt",
    "x" * 256,
    "/".join(["a" * 50] * 5)[:256],
]
BAD_PATHS = {
    "a space.md": "only A-Z a-z 0-9",
    "caf\u00e9.md": "only A-Z a-z 0-9",
    "back\\slash.md": "only A-Z a-z 0-9",
    "star*.md": "only A-Z a-z 0-9",
    ".hidden.md": "starts with '.'",
    "notes/.swp": "starts with '.'",
    "a/.b.md.swp": "starts with '.'",
    "../escape.md": "starts with '.'",
    "a/../b.md": "starts with '.'",
    "..": "starts with '.'",
    "a/b/c/d/e/f.md": "more than 5 segments",
    "x" * 257: "longer than 256",
    "/absolute.md": "relative",
    "a//b.md": "segment is empty",
    "trailing/": "segment is empty",
    "": "required",
}


@pytest.mark.parametrize("path", GOOD_PATHS)
def test_bank_paths_accepted(bank: Bank, user: str, path: str) -> None:
    result = bank.put(path, "ok", actor=actor(user))
    assert result.created and result.entry.path == path
    assert bank.read(path).content == "ok"


@pytest.mark.parametrize(("path", "why"), list(BAD_PATHS.items()))
def test_bank_paths_refused_with_a_clear_error(bank: Bank, user: str, path: str, why: str) -> None:
    bank.put("keep.md", "x", actor=actor(user))
    before = store_state(bank.store)
    with pytest.raises(InvalidRequest, match="invalid path") as info:
        bank.put(path, "content", actor=actor(user))
    assert why in info.value.message
    assert store_state(bank.store) == before
    with pytest.raises(InvalidRequest):
        bank.read(path)
    with pytest.raises(InvalidRequest):
        bank.delete(path, actor=actor(user))


def test_dotdot_cannot_reach_outside(bank: Bank, user: str) -> None:
    for path in ("..", "../x", "a/..", "a/../../x", "./x"):
        with pytest.raises(InvalidRequest):
            bank.put(path, "x", actor=actor(user))
    assert bank.entries() == []


def test_entry_size_cap(bank: Bank, user: str) -> None:
    assert bank.put("max.md", "x" * (64 * KIB), actor=actor(user)).entry.size == 64 * KIB
    before = store_state(bank.store)
    with pytest.raises(TooLarge, match="65537 bytes; at most 65536"):
        bank.put("over.md", "x" * (64 * KIB + 1), actor=actor(user))
    with pytest.raises(TooLarge):
        bank.put("max.md", "y" * (64 * KIB + 1), actor=actor(user))  # an update too
    with pytest.raises(TooLarge):
        bank.put("multi.md", "\u00e9" * (32 * KIB + 1), actor=actor(user))  # bytes, not characters
    assert store_state(bank.store) == before


def test_entry_count_cap(fast_gm: Gitmem) -> None:
    ws = fast_gm.catalog.create_workspace("bulk")
    user, _ = fast_gm.catalog.create_user(ws.id, "sam")
    profiles = profiles_for(fast_gm)
    bank = profiles.bank(profiles.create(ws.id, user.id, "full"))
    for i in range(100):
        bank.put(f"notes/n{i:03}.md", f"entry {i}", actor=actor(user.id))
    before = store_state(bank.store)
    with pytest.raises(LimitExceeded, match="at most 100"):
        bank.put("one-too-many.md", "101st", actor=actor(user.id))
    assert store_state(bank.store) == before
    assert bank.put("notes/n000.md", "updating is still fine", actor=actor(user.id)).changed
    bank.delete("notes/n001.md", actor=actor(user.id))
    assert bank.put("one-more.md", "fits again", actor=actor(user.id)).created
    assert bank.totals()[0] == 100


def test_total_size_cap(fast_gm: Gitmem) -> None:
    ws = fast_gm.catalog.create_workspace("bulk")
    user, _ = fast_gm.catalog.create_user(ws.id, "sam")
    profiles = profiles_for(fast_gm)
    bank = profiles.bank(profiles.create(ws.id, user.id, "big"))
    for i in range(80):  # 80 x 64 KiB = 5 MiB exactly
        bank.put(f"big/{i:02}.md", chr(ord("a") + i % 26) * (64 * KIB), actor=actor(user.id))
    assert bank.totals() == (80, 5 * MIB)
    before = store_state(bank.store)
    with pytest.raises(LimitExceeded, match=f"at most {5 * MIB} bytes"):
        bank.put("one-byte.md", "x", actor=actor(user.id))
    assert bank.put("big/00.md", "b" * (64 * KIB), actor=actor(user.id)).changed  # same size: still fits
    assert bank.put("big/01.md", "small", actor=actor(user.id)).changed
    assert bank.put("one-byte.md", "x", actor=actor(user.id)).created  # 5 MiB - 65530 bytes now
    before = store_state(bank.store)
    with pytest.raises(LimitExceeded, match="bytes"):
        bank.put("big/01.md", "c" * (64 * KIB), actor=actor(user.id))  # growing it back: 1 byte over
    assert store_state(bank.store) == before


def test_entries_cannot_collide(bank: Bank, user: str) -> None:
    bank.put("projects", "a file", actor=actor(user))
    with pytest.raises(PathConflict) as info:
        bank.put("projects/acme.md", "below a file", actor=actor(user))
    assert info.value.details["conflicting_path"] == "projects"
    bank.put("area/x.md", "x", actor=actor(user))
    with pytest.raises(PathConflict):
        bank.put("area", "above a file", actor=actor(user))


def test_secrets_are_refused_in_banks(bank: Bank, user: str) -> None:
    with pytest.raises(InvalidRequest):
        bank.put(
            "keys.md",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7kMekS0CEEMHT2Yat0ML8xMxdVmmCOIk\n"
            "bt5xGn2wMnRUGV2RTZJdhXp8LNLr/ZuUy\n-----END RSA PRIVATE KEY-----\n",
            actor=actor(user),
        )


# -- created / changed -----------------------------------------------------------------------------------


def test_created_changed_and_the_no_op(bank: Bank, user: str) -> None:
    first = bank.put("preferences.md", "staging first", actor=actor(user))
    assert (first.created, first.changed) == (True, True)
    again = bank.put("preferences.md", "staging first", actor=actor(user))
    assert (again.created, again.changed) == (False, False)
    assert again.entry.version_id == first.entry.version_id
    assert len(bank.store.versions(limit=100).items) == 1  # no new version
    edit = bank.put("preferences.md", "staging first, always", actor=actor(user))
    assert (edit.created, edit.changed) == (False, True)
    versions = bank.store.versions(limit=100).items
    assert [v.operation for v in versions] == ["modified", "created"]
    assert all(v.created_by == actor(user) for v in versions)  # user_actor versions
    entry = bank.read("preferences.md")
    assert entry.content == "staging first, always"
    assert entry.size == len("staging first, always") and len(entry.content_hash) == 64
    assert entry.created_at == first.entry.created_at and entry.updated_at > entry.created_at
    deleted = bank.delete("preferences.md", actor=actor(user))
    assert deleted.path == "preferences.md"
    with pytest.raises(NotFound):
        bank.read("preferences.md")
    with pytest.raises(NotFound):
        bank.delete("preferences.md", actor=actor(user))
    again = bank.put("preferences.md", "back", actor=actor(user))
    assert again.created


def test_listing_is_metadata_in_path_order(bank: Bank, user: str) -> None:
    for path in ("z.md", "a/b.md", "m.md"):
        bank.put(path, f"body of {path}", actor=actor(user))
    entries = bank.entries()
    assert [e.path for e in entries] == ["a/b.md", "m.md", "z.md"]
    assert all(e.content is None for e in entries)


def test_preconditions(bank: Bank, user: str) -> None:
    from gitmem.errors import PreconditionFailed

    made = bank.put("p.md", "one", actor=actor(user), expected_hash="")
    with pytest.raises(PreconditionFailed):
        bank.put("p.md", "two", actor=actor(user), expected_hash="")
    with pytest.raises(PreconditionFailed):
        bank.put("p.md", "two", actor=actor(user), expected_hash="0" * 64)
    assert bank.put("p.md", "two", actor=actor(user), expected_hash=made.entry.content_hash).changed
    with pytest.raises(PreconditionFailed):
        bank.delete("p.md", actor=actor(user), expected_hash=made.entry.content_hash)


# -- the system-prompt section -------------------------------------------------------------------------------


def test_prompt_section_for_an_empty_bank() -> None:
    text = render_section([])
    assert text.startswith(HEADING + "\n")
    assert "The bank is empty" in text and "create the first entry" in text
    assert "`.memory/`" in text and "next session" in text
    assert "wiped" in text and "transient" in text
    assert "- `.memory/" not in text  # no entry listed


def test_prompt_section_for_a_full_bank(fast_gm: Gitmem) -> None:
    from gitmem.agents.prompt import bank_section

    ws = fast_gm.catalog.create_workspace("bulk")
    user, _ = fast_gm.catalog.create_user(ws.id, "sam")
    profiles = profiles_for(fast_gm)
    bank = profiles.bank(profiles.create(ws.id, user.id, "investigations"))
    paths = [f"projects/p{i:03}.md" for i in range(99)] + ["preferences.md"]
    for path in paths:
        bank.put(path, "x", actor=actor(user.id))
    text = bank_section(bank)
    assert text.startswith(HEADING)
    assert "investigations" in text
    assert "100 entries" in text
    for path in paths:
        assert f"- `.memory/{path}`" in text
    assert "create the first entry" not in text
    assert "next session" in text and "wiped at the next session start" in text
    listed = [line for line in text.splitlines() if line.startswith("- `.memory/")]
    assert listed == sorted(listed)


# -- deletion ------------------------------------------------------------------------------------------------


def test_deleting_a_profile_leaves_nothing_of_its_bank(
    gm: Gitmem, workspace: Workspace, user: str, profile: Profile, bank: Bank
) -> None:
    bank.put("preferences.md", "secret preference", actor=actor(user))
    repo = gm.repo_path(profile.bank_store_id)
    keys_file = gm.home / "keys.json"
    assert profile.bank_store_id in keys_file.read_text()
    keeper = profiles_for(gm).create(workspace.id, user, "keeper")
    profiles_for(gm).delete(workspace.id, user, profile.id)
    assert not repo.exists()
    assert profile.bank_store_id not in keys_file.read_text()
    assert keeper.bank_store_id in keys_file.read_text()  # only that bank's key went
    assert not gm.keyring.has(profile.bank_store_id)
    with pytest.raises(NotFound):
        profiles_for(gm).get(workspace.id, user, profile.id)
    with pytest.raises(NotFound):
        gm.get_store(workspace.id, profile.bank_store_id)
    leftovers = [p for p in (gm.home / "stores").iterdir() if profile.bank_store_id in p.name]
    assert leftovers == []
    assert b"secret preference" not in b"".join(p.read_bytes() for p in gm.home.rglob("*") if p.is_file())


# -- the CLI -------------------------------------------------------------------------------------------------


def test_cli_profiles_prompt_and_key_export(tmp_path: Path) -> None:
    home = tmp_path / "cli-home"
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(cli, ["--home", str(home), *args], catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.output

    run("users", "create", "--name", "sam")
    gm = Gitmem.open(home)
    user_id = gm.catalog.list_users()[0].id
    profile_id = run("profiles", "create", "research", "--user", user_id).strip()
    assert profile_id.startswith("profile_")
    assert profile_id in run("profiles", "list", "--user", user_id)
    section = run("prompt", "--profile", profile_id)
    assert section.startswith(HEADING) and "create the first entry" in section
    profile = profiles_for(gm).get_any(profile_id)
    profiles_for(gm).bank(profile).put("projects/acme.md", "## Acme", actor=actor(user_id))
    assert "- `.memory/projects/acme.md`" in run("prompt", "--profile", profile_id)
    shown = json.loads(run("profiles", "show", profile_id))
    assert shown["entries"] == 1 and shown["memories"][0]["path"] == "projects/acme.md"
    exported = run("encryption", "export", profile.bank_store_id).strip()
    assert exported == export_key(gm.keyring.current(profile.bank_store_id))
    plain = gm.create_store(gm.catalog.list_workspaces()[0].id, "plain")
    assert "not encrypted" in runner.invoke(cli, ["--home", str(home), "encryption", "export", plain.id]).output
    run("profiles", "delete", profile_id, "--yes")
    assert not gm.repo_path(profile.bank_store_id).exists()
    assert runner.invoke(cli, ["--home", str(home), "prompt", "--profile", profile_id]).exit_code == 1


def test_a_bank_is_its_owners_alone_on_other_surfaces(gm: Gitmem, workspace: Workspace) -> None:
    """``check_bank_access`` is what the memory-store API and Git's smart HTTP call for a store id."""
    from gitmem.banks.profiles import check_bank_access

    owner, owner_token = gm.catalog.create_user(workspace.id, "owner")
    profile = profiles_for(gm).create(workspace.id, owner.id, "mine")
    check_bank_access(gm, gm.catalog.authenticate(owner_token), profile.bank_store_id)
    _key, secret = gm.catalog.create_api_key(workspace.id, "admin")
    _other, token = gm.catalog.create_user(workspace.id, "alex")
    for principal in (gm.catalog.authenticate(secret), gm.catalog.authenticate(token)):
        with pytest.raises(NotFound):
            check_bank_access(gm, principal, profile.bank_store_id)
    plain = gm.create_store(workspace.id, "shared notes")
    check_bank_access(gm, gm.catalog.authenticate(secret), plain.id)  # not a bank: no restriction
