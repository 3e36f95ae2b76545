"""Encryption at rest, end to end (docs/architecture.md): no plaintext anywhere in a store's directory (loose
objects, packs, the index), ``gitmem clone`` with and without the key over real smart HTTP, key rotation
as a history rewrite after which the old key reads nothing, and a deleted profile leaving nothing behind.
"""

from __future__ import annotations

import itertools
import os
import stat
import subprocess
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.banks.profiles import profiles_for
from gitmem.cli import main as cli
from gitmem.cli.notes.clone import TOKEN_FILE, clone_store
from gitmem.crypto.codec import SivCodec, parse_header
from gitmem.crypto.master_key import DecryptionFailed, export_key
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.rotation import blob_key_ids, rotate_store_key
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import PreconditionFailed
from gitmem.model import Actor, StoreInfo
from tests.checks import assert_fsck_clean, git, listed_notes
from tests.checks import blob as blob_of
from tests.server import RealServer

SECRETS = {
    "/preferences.md": "always run terraform plans against staging first (marker-7f3a)",
    "/projects/acme.md": "## Acme Corp\n- single-tenant deployment\n- compliance: SOC2 (marker-91bc)",
    "/hosts/inventory.md": "bastion-alpha.internal 10.0.4.17 (marker-c0de)",
}
MARKERS = [
    b"marker-7f3a",
    b"marker-91bc",
    b"marker-c0de",
    b"marker-5eed",
    b"terraform plans",
    b"Acme Corp",
    b"bastion-alpha",
]
LOST_EDIT = "an edit that lost its race (marker-5eed)"  # kept as a conflict: encrypted like a note
CLIENT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def fill(store: MemoryStore, user: str = "user_test") -> None:
    """Every operation once: create, update, rename, delete, so every kind of history is there."""
    who = Actor("user_actor", user)
    notes = {path: store.create(path, text, actor=who) for path, text in SECRETS.items()}
    store.update(notes["/preferences.md"].id, content=SECRETS["/preferences.md"] + "\n(updated marker-7f3a)", actor=who)
    with pytest.raises(PreconditionFailed):  # based on the text before that update: kept as a conflict
        store.update(
            notes["/preferences.md"].id, content=LOST_EDIT, expected_sha256=notes["/preferences.md"].content_sha256
        )
    doomed = store.create("/old/gone.md", "deleted later (marker-91bc)", actor=who)
    store.update(doomed.id, path="/old/moved.md", actor=who)
    store.delete(doomed.id, actor=who)


def git_bytes(repo: Path, *args: str) -> bytes:
    """``git`` output as bytes (a log of ciphertext is not UTF-8); ``--text`` so diffs show blob bytes."""
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


def loose_objects(repo: Path) -> Iterator[bytes]:
    for folder in (repo / "objects").iterdir():
        if len(folder.name) == 2 and folder.is_dir():
            for file in folder.iterdir():
                yield zlib.decompress(file.read_bytes())


def every_object(repo: Path) -> bytes:
    return subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
    ).stdout


def all_blobs(repo: Path) -> Iterator[bytes]:
    """Every blob in the repository, reachable or not, loose or packed, but the rewrite log's records
    (ids and times, no content: gitmem.git.rewrite_log), which no key encrypts."""
    import pygit2

    listing = git_bytes(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)")
    handle = pygit2.Repository(str(repo))
    log = handle.references.get("refs/gitmem/rewrites")
    records = set()
    for commit in handle.walk(log.target) if log is not None else []:
        records |= {str(item.id) for item in commit.tree}
    for line in listing.decode().splitlines():
        oid, kind = line.split()
        if kind == "blob" and oid not in records:
            yield blob_of(handle[oid]).data


def raw_files(repo: Path) -> Iterator[tuple[Path, bytes]]:
    for path in repo.rglob("*"):
        if path.is_file():
            yield path, path.read_bytes()


def assert_no_plaintext(repo: Path) -> None:
    loose, objects, files = list(loose_objects(repo)), every_object(repo), list(raw_files(repo))  # read once
    for marker in MARKERS:
        assert not any(marker in obj for obj in loose), f"{marker!r} in a loose object"
        assert marker not in objects, f"{marker!r} in an object"
        for path, data in files:  # the index, its WAL, packs, refs, config...
            assert marker not in data, f"{marker!r} in {path}"


@pytest.fixture
def user_id(gm: Gitmem, workspace: Workspace) -> str:
    return gm.catalog.create_user(workspace.id, "sam")[0].id


@pytest.fixture(params=["bank", "shared"])
def encrypted(request: pytest.FixtureRequest, gm: Gitmem, workspace: Workspace, user_id: str) -> StoreInfo:
    """A profile's bank, and a memory store that asked for encryption."""
    if request.param == "bank":
        profile = profiles_for(gm).create(workspace.id, user_id, "research")
        return gm.get_store(workspace.id, profile.bank_store_id)
    return gm.create_store(workspace.id, "private notes", encrypted=True)


# -- nothing in the clear ----------------------------------------------------------------------------------


def test_the_repository_holds_no_plaintext(gm: Gitmem, workspace: Workspace, encrypted: StoreInfo) -> None:
    store = gm.store(workspace.id, encrypted.id)
    fill(store)
    repo = gm.repo_path(encrypted.id)
    assert store.get_by_path("/projects/acme.md").content == SECRETS["/projects/acme.md"]
    assert list((repo / "objects" / "pack").glob("*.pack"))  # the packs the writes made, to look into
    assert_no_plaintext(repo)
    git(repo, "repack", "-a", "-d", "-q")
    assert list((repo / "objects" / "pack").glob("*.pack"))
    assert_no_plaintext(repo)  # packs (deltas and all), through cat-file and as raw bytes
    blobs = [b for b in every_object(repo).split(b"\n") if b.startswith(b"GITMEM-SIV1 ")]
    assert blobs, "blobs carry the encryption header"
    # What stays visible, as documented: paths, sizes, times, authors.
    log = git(repo, "log", "--format=%an %s", "main")
    assert "user_test created /projects/acme.md" in log
    index = b"".join(p.read_bytes() for p in (repo / "gitmem").glob("index.sqlite3*"))  # with its WAL
    assert b"/projects/acme.md" in index


def test_a_plain_store_is_plain(gm: Gitmem, workspace: Workspace) -> None:
    """The control: the same checks find the plaintext of an unencrypted store."""
    info = gm.create_store(workspace.id, "plain")
    fill(gm.store(workspace.id, info.id))
    with pytest.raises(AssertionError):
        assert_no_plaintext(gm.repo_path(info.id))


# -- git clone with and without the key --------------------------------------------------------------------


@dataclass(frozen=True)
class Served:
    url: str
    token: str  # the bank owner's
    info: StoreInfo  # the bank
    gm: Gitmem  # the served home
    workspace: Workspace


@pytest.fixture(scope="module")
def bank_server(real_server: RealServer) -> tuple[str, Gitmem, Workspace]:
    """The real server for the module's clones (Git's client needs the network); each test has its own bank."""
    gm = Gitmem.open(real_server.home)
    workspace = gm.catalog.create_workspace("encryption")
    return real_server.base_url, gm, workspace


@pytest.fixture
def served(bank_server: tuple[str, Gitmem, Workspace]) -> Served:
    """A bank with history, of an owner of its own, on the module's server."""
    url, gm, workspace = bank_server
    owner, token = gm.catalog.create_user(workspace.id, f"owner {next(_owners)}")
    profile = profiles_for(gm).create(workspace.id, owner.id, "research")
    info = gm.get_store(workspace.id, profile.bank_store_id)
    fill(gm.store(workspace.id, info.id))
    return Served(url, token, info, gm, workspace)


_owners = itertools.count()


@pytest.fixture
def client_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An isolated Git client: no system or user config, a throwaway HOME."""
    home = tmp_path / "client-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for key, value in CLIENT_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("GITMEM_TOKEN", raising=False)
    # A global "store" helper must not learn the token: the clone resets the helper list.
    subprocess.run(["git", "config", "--global", "credential.helper", "store"], check=True)


@pytest.mark.slow
@pytest.mark.usefixtures("client_env")
def test_clone_without_the_key_shows_no_plaintext(tmp_path: Path, served: Served) -> None:
    url, token, info = served.url, served.token, served.info
    target = clone_store(info.id, tmp_path / "no-key", base_url=url, token=token)
    log = git_bytes(target, "log", "-p", "--text", "--all")
    assert b"GITMEM-SIV1" in log  # the diffs are there, as ciphertext
    for marker in MARKERS:
        assert marker not in log
        for file in target.rglob("*"):
            if file.is_file() and ".git" not in file.parts[len(target.parts) : len(target.parts) + 1]:
                assert marker not in file.read_bytes()
    assert (target / "projects" / "acme.md").read_bytes().startswith(b"GITMEM-SIV1 ")
    # The token is not in the remote URL or the config; it is in a 0600 file only Git's helper reads.
    config = (target / ".git" / "config").read_text()
    assert token not in config
    assert git(target, "remote", "get-url", "origin").strip() == f"{url}/v1/memory_stores/{info.id}.git"
    token_file = target / ".git" / TOKEN_FILE
    assert token_file.read_text().strip() == token
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert not (Path(os.environ["HOME"]) / ".git-credentials").exists()
    # Later fetches authenticate through the helper.
    git(target, "fetch", "-q", "origin")


@pytest.mark.slow
@pytest.mark.usefixtures("client_env")
def test_clone_with_the_key_shows_plaintext(tmp_path: Path, served: Served) -> None:
    url, token, info, gm, workspace = served.url, served.token, served.info, served.gm, served.workspace
    key_text = export_key(gm.keyring.current(info.id))
    target = clone_store(f"{url}/v1/memory_stores/{info.id}.git", tmp_path / "with-key", token=token, key_text=key_text)
    log = git(target, "log", "-p", "main")
    assert "+## Acme Corp" in log and "marker-c0de" in log and "(updated marker-7f3a)" in log
    assert (target / "projects" / "acme.md").read_text() == SECRETS["/projects/acme.md"]
    assert git(target, "status", "--porcelain") == ""
    # Fetching a later write shows it in plaintext too.
    gm.store(workspace.id, info.id).create("/later.md", "written after the clone (marker-later)")
    git(target, "pull", "-q", "--ff-only")
    assert (target / "later.md").read_text() == "written after the clone (marker-later)"
    assert "marker-later" in git(target, "log", "-p", "-1")


@pytest.mark.slow
@pytest.mark.usefixtures("client_env")
def test_clone_needs_the_token(tmp_path: Path, served: Served) -> None:
    from gitmem.errors import InvalidRequest

    url, info = served.url, served.info
    with pytest.raises(InvalidRequest, match="git clone failed"):
        clone_store(info.id, tmp_path / "anonymous", base_url=url)
    with pytest.raises(InvalidRequest, match="git clone failed"):
        clone_store(info.id, tmp_path / "wrong", base_url=url, token="gm_usr_wrong")


@pytest.mark.slow
@pytest.mark.usefixtures("client_env")
def test_only_the_owner_clones_a_bank(tmp_path: Path, served: Served) -> None:
    from gitmem.errors import InvalidRequest

    url, info, gm, workspace = served.url, served.info, served.gm, served.workspace
    _alex, alex = gm.catalog.create_user(workspace.id, "alex")
    _key, admin = gm.catalog.create_api_key(workspace.id, "admin")
    for token in (alex, admin):
        with pytest.raises(InvalidRequest, match="git clone failed"):
            clone_store(info.id, tmp_path / token[:12], base_url=url, token=token)


@pytest.mark.usefixtures("client_env")
def test_clone_a_local_repository_with_the_cli(gm: Gitmem, workspace: Workspace, tmp_path: Path) -> None:
    """``gitmem clone PATH --key``: the same filter setup on a plain path clone of the bare repository."""
    info = gm.create_store(workspace.id, "private", encrypted=True)
    fill(gm.store(workspace.id, info.id))
    runner = CliRunner()
    exported = runner.invoke(cli, ["--home", str(gm.home), "encryption", "export", info.id])
    assert exported.exit_code == 0
    key_file = tmp_path / "key.txt"
    key_file.write_text(exported.output)
    target = tmp_path / "local-clone"
    result = runner.invoke(cli, ["clone", str(gm.repo_path(info.id)), str(target), "--key-file", str(key_file)])
    assert result.exit_code == 0, result.output
    assert "marker-91bc" in git(target, "log", "-p")
    plain = runner.invoke(cli, ["clone", str(gm.repo_path(info.id)), str(tmp_path / "plain-clone")])
    assert plain.exit_code == 0, plain.output
    assert b"marker-91bc" not in git_bytes(tmp_path / "plain-clone", "log", "-p", "--text")


# -- rotation -----------------------------------------------------------------------------------------------


def audit(repo: Path) -> list[str]:
    """The history as ``git log`` tells it, minus commit ids (which a rewrite changes)."""
    return git(repo, "log", "--format=%an|%ae|%at|%cn|%ct|%B%x00", "main").split("\0")


def test_rotation_leaves_nothing_the_old_key_can_read(gm: Gitmem, workspace: Workspace, encrypted: StoreInfo) -> None:
    store = gm.store(workspace.id, encrypted.id)
    fill(store)
    repo = gm.repo_path(encrypted.id)
    old_key = gm.keyring.current(encrypted.id)
    git(repo, "repack", "-a", "-d", "-q")  # old ciphertext in a pack as well as loose
    store.create("/after-pack.md", "loose again (marker-c0de)")
    before_history = audit(repo)
    before_versions = [
        (v.id, v.operation, v.path, v.content_sha256, v.created_by, v.created_at)
        for v in store.versions(limit=100).items
    ]
    before_notes = {n.path: store.get(n.id).content for n in listed_notes(store.list(limit=100).items)}

    readable = SivCodec(old_key, encrypted.id)
    for blob in all_blobs(repo):  # before: the old key reads every blob
        header = parse_header(blob)
        assert header is not None
        readable.decode(header.path, blob)

    runner = CliRunner()
    result = runner.invoke(cli, ["--home", str(gm.home), "encryption", "rotate", encrypted.id])
    assert result.exit_code == 0, result.output
    assert old_key.key_id in result.output

    new_key = gm.keyring.current(encrypted.id)
    assert new_key.key_id != old_key.key_id
    assert [r.key_id for r in gm.keyring.records(encrypted.id)] == [new_key.key_id]  # the old one is destroyed
    assert blob_key_ids(repo) == {new_key.key_id: blob_key_ids(repo)[new_key.key_id]}
    old = SivCodec(old_key, encrypted.id)
    blobs = 0
    for blob in all_blobs(repo):
        header = parse_header(blob)
        assert header is not None and header.key_id == new_key.key_id
        # Even told the blob is its own (the header's key id swapped for the old one), the old key fails.
        forged = blob.replace(new_key.key_id.encode(), old_key.key_id.encode(), 1)
        with pytest.raises(DecryptionFailed, match="does not authenticate"):
            old.decode(header.path, forged)
        blobs += 1
    assert blobs >= 6
    # Every blob decodes under the new key alone, and nothing else changed.
    assert audit(repo) == before_history
    fresh = Gitmem.open(gm.home)
    store = fresh.store(workspace.id, encrypted.id)
    assert [
        (v.id, v.operation, v.path, v.content_sha256, v.created_by, v.created_at)
        for v in store.versions(limit=100).items
    ] == before_versions
    assert {n.path: store.get(n.id).content for n in listed_notes(store.list(limit=100).items)} == before_notes
    assert_fsck_clean(repo)
    assert_no_plaintext(repo)
    # A reindex from the history alone gives the same answers; writes go on under the new key.
    store.index.rebuild()
    assert {n.path: store.get(n.id).content for n in listed_notes(store.list(limit=100).items)} == before_notes
    assert [c.content for c in store.conflicts.list(with_content=True).items] == [LOST_EDIT]  # re-encrypted too
    store.create("/after-rotation.md", "new")
    assert set(blob_key_ids(repo)) == {new_key.key_id}


def test_rotation_of_a_plain_store_is_refused(gm: Gitmem, workspace: Workspace) -> None:
    from gitmem.errors import InvalidRequest

    info = gm.create_store(workspace.id, "plain")
    with pytest.raises(InvalidRequest, match="not encrypted"):
        rotate_store_key(gm, info.id)


def test_a_rotated_bank_serves_the_same_api(gm: Gitmem, workspace: Workspace, user_id: str) -> None:
    profiles = profiles_for(gm)
    profile = profiles.create(workspace.id, user_id, "research")
    bank = profiles.bank(profile)
    bank.put("preferences.md", "staging first", actor=Actor("user_actor", user_id))
    rotate_store_key(Gitmem.open(gm.home), profile.bank_store_id)  # as another process (the CLI) would
    bank = profiles.bank(profile)  # this one's cached store had the retired key: it is reopened
    assert bank.read("preferences.md").content == "staging first"
    assert not bank.put("preferences.md", "staging first", actor=Actor("user_actor", user_id)).changed
    assert bank.put("preferences.md", "prod later", actor=Actor("user_actor", user_id)).changed
    assert set(blob_key_ids(gm.repo_path(profile.bank_store_id))) == {gm.keyring.current(profile.bank_store_id).key_id}


# -- deletion --------------------------------------------------------------------------------------------------


def test_a_deleted_profile_leaves_nothing_on_disk(
    gm: Gitmem, workspace: Workspace, user_id: str, tmp_path: Path
) -> None:
    profiles = profiles_for(gm)
    profile = profiles.create(workspace.id, user_id, "research")
    fill(gm.store(workspace.id, profile.bank_store_id))
    repo = gm.repo_path(profile.bank_store_id)
    key_text = export_key(gm.keyring.current(profile.bank_store_id))
    old_clone = tmp_path / "old-clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(old_clone)], check=True)
    profiles.delete(workspace.id, user_id, profile.id)
    assert not repo.exists()
    assert profile.bank_store_id not in (gm.home / "keys.json").read_text()
    assert not any(profile.bank_store_id in str(p) for p in gm.home.rglob("*"))
    for marker in MARKERS:
        for _path, data in raw_files(gm.home):
            assert marker not in data
    # The server can no longer decrypt an old clone: the only key it had is gone (a key handed out
    # earlier with `gitmem encryption export` is the holder's, as documented).
    assert not gm.keyring.has(profile.bank_store_id)
    assert b"marker-91bc" not in git_bytes(old_clone, "log", "-p", "--text")
    assert key_text  # exported before the deletion; nothing on the server matches it any more


@pytest.mark.usefixtures("client_env")
def test_rotation_keeps_the_ids_of_pushed_versions(
    gm: Gitmem, workspace: Workspace, user_id: str, tmp_path: Path
) -> None:
    """A commit pushed with plain Git has no trailers; its version ids survive the rewrite as trailers."""
    info = gm.create_store(workspace.id, "pushed", encrypted=True)
    store = gm.store(workspace.id, info.id)
    fill(store)
    repo = gm.repo_path(info.id)
    work = clone_store(str(repo), tmp_path / "work", key_text=export_key(gm.keyring.current(info.id)), store_id=info.id)
    (work / "projects" / "acme.md").write_text(SECRETS["/projects/acme.md"] + "\n- pushed line (marker-c0de)")
    (work / "pushed.md").write_text("new from a push")
    git(work, "add", "-A")
    name = gm.catalog.credential(user_id).name  # pushed commits must name the pusher
    identity = {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": f"{user_id}@user.gitmem",
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": f"{user_id}@user.gitmem",
    }
    subprocess.run(
        ["git", "commit", "-q", "-m", "edit by hand"],
        cwd=work,
        check=True,
        capture_output=True,
        env={**os.environ, **CLIENT_ENV, **identity},
    )
    push = subprocess.run(
        ["git", "-C", str(work), "push", "-q", "origin", "HEAD:main"],
        capture_output=True,
        text=True,
        env={**os.environ, "GITMEM_USER_ID": user_id, "GITMEM_ACCESS": "read_write", "GITMEM_HOME": str(gm.home)},
    )
    if push.returncode != 0:
        pytest.skip(f"pushing to a store is not available here: {push.stderr.strip()}")
    store = Gitmem.open(gm.home).store(workspace.id, info.id)
    before = [
        (v.id, v.memory_id, v.operation, v.path, v.content_sha256, v.created_by)
        for v in store.versions(limit=100).items
    ]
    pushed = [
        v
        for v in before
        if v[3] in ("/pushed.md", "/projects/acme.md")
        and v[5] == Actor("user_actor", user_id)
        and v[2] in ("created", "modified")
    ]
    assert pushed
    rotate_store_key(gm, info.id)
    store = Gitmem.open(gm.home).store(workspace.id, info.id)
    store.index.rebuild()  # from the rewritten history alone
    after = [
        (v.id, v.memory_id, v.operation, v.path, v.content_sha256, v.created_by)
        for v in store.versions(limit=100).items
    ]
    assert after == before
    assert "Memory-Version:" in git(repo, "log", "-1", "--format=%B", "main")
    assert store.get_by_path("/pushed.md").content == "new from a push"
    assert set(blob_key_ids(repo)) == {gm.keyring.current(info.id).key_id}


def test_a_cached_store_writes_with_the_key_rotated_by_another_process(gm: Gitmem, workspace: Workspace) -> None:
    info = gm.create_store(workspace.id, "private notes", encrypted=True)
    gm.store(workspace.id, info.id).create("/before.md", "old key")
    rotate_store_key(Gitmem.open(gm.home), info.id)  # as `gitmem encryption rotate` would, elsewhere
    store = gm.store(workspace.id, info.id)  # the server's cached store had the retired key
    store.create("/after.md", "new key")
    assert set(blob_key_ids(gm.repo_path(info.id))) == {gm.keyring.current(info.id).key_id}
    assert {n.path: store.get(n.id).content for n in listed_notes(store.list().items)} == {
        "/after.md": "new key",
        "/before.md": "old key",
    }
