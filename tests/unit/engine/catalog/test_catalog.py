"""The catalog: workspaces, API keys and users (hashed), roles, isolation, and the shared-store limit.

Every test runs on SQLite in the home and on a throwaway PostgreSQL (tests/postgres.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gitmem.clock import FrozenClock
from gitmem.db import PostgresDatabase
from gitmem.engine import gitmem as home_module
from gitmem.engine.catalog.catalog import Catalog, Workspace, hash_secret
from gitmem.engine.gitmem import Gitmem
from gitmem.errors import AuthenticationFailed, InvalidRequest, LimitExceeded, NotFound
from gitmem.model import Actor
from gitmem.rules.policy import MAX_SHARED_STORES


@pytest.fixture
def gm(tmp_path: Path, clock: FrozenClock, database_url: str | None) -> Iterator[Gitmem]:
    home = Gitmem.open(tmp_path / "home", clock=clock, fsync="always", database=database_url or "")
    yield home
    home.close()


def all_bytes(gm: Gitmem) -> bytes:
    """The catalog as it is stored: the SQLite files, write-ahead log included, or every PostgreSQL row."""
    if gm.catalog.path is None:
        rows = gm.catalog.db.execute("SELECT * FROM credentials").fetchall()
        return repr(rows).encode()
    gm.catalog.db.execute("PRAGMA wal_checkpoint(FULL)")
    return b"".join(p.read_bytes() for p in gm.home.glob("catalog.sqlite3*"))


def another_process(gm: Gitmem) -> Catalog:
    """The same catalog opened anew, as another process (or node) would."""
    if gm.catalog.path is None:
        return Catalog(PostgresDatabase(gm.catalog.db.url))  # type: ignore[attr-defined]
    return Catalog(gm.catalog.path)


def test_workspaces(gm: Gitmem) -> None:
    ws = gm.catalog.create_workspace("acme")
    assert ws.id.startswith("wrkspc_") and ws.name == "acme"
    assert gm.catalog.workspace_by_name("acme") == ws
    assert gm.catalog.workspace(ws.id) == ws
    assert gm.catalog.workspace_by_name("nobody") is None
    with pytest.raises(InvalidRequest):
        gm.catalog.create_workspace("acme")  # names are unique
    with pytest.raises(InvalidRequest):
        gm.catalog.create_workspace("")
    with pytest.raises(NotFound):
        gm.catalog.workspace("wrkspc_missing")
    with pytest.raises(NotFound):
        gm.create_store("wrkspc_missing", "s")
    assert ws in gm.catalog.list_workspaces()


def test_api_keys_are_shown_once_and_stored_hashed(gm: Gitmem, workspace: Workspace) -> None:
    key, secret = gm.catalog.create_api_key(workspace.id, "ci", role="read-only")
    assert key.id.startswith("apikey_") and secret.startswith("gm_key_") and len(secret) > 40
    assert key.role == "read-only" and key.revoked_at is None and key.kind == "api_key"
    assert secret not in repr(key)
    on_disk = all_bytes(gm)
    assert secret.encode() not in on_disk
    assert secret.split("_", 2)[2].encode() not in on_disk  # not even the random part
    assert hash_secret(secret).encode() in on_disk
    assert gm.catalog.list_api_keys(workspace.id) == [key]


def test_users_are_shown_once_and_stored_hashed(gm: Gitmem, workspace: Workspace) -> None:
    user, token = gm.catalog.create_user(workspace.id, "sam")
    assert user.id.startswith("user_") and token.startswith("gm_usr_")
    assert token.encode() not in all_bytes(gm)
    principal = gm.catalog.authenticate(token)
    assert principal.actor == Actor("user_actor", user.id) and principal.workspace_id == workspace.id
    assert principal.can_write
    assert gm.catalog.list_users(workspace.id) == [user]
    gm.catalog.revoke_user(user.id)
    with pytest.raises(AuthenticationFailed):
        gm.catalog.authenticate(token)


def test_authenticate_and_roles(gm: Gitmem, workspace: Workspace) -> None:
    secrets = {
        role: gm.catalog.create_api_key(workspace.id, role, role=role) for role in ("admin", "read-write", "read-only")
    }
    for role, (key, secret) in secrets.items():
        principal = gm.catalog.authenticate(secret)
        assert (principal.role, principal.workspace_id, principal.credential_id) == (role, workspace.id, key.id)
        assert principal.actor == Actor("api_actor", key.id) and principal.task_id is None
        assert principal.can_write == (role != "read-only")
    with pytest.raises(InvalidRequest):
        gm.catalog.create_api_key(workspace.id, "bad", role="owner")  # type: ignore[arg-type]
    for wrong in (None, "", "gm_key_wrong", secrets["admin"][1] + "x", secrets["admin"][1].upper()):
        with pytest.raises(AuthenticationFailed) as refused:
            gm.catalog.authenticate(wrong)
        assert refused.value.status == 401 and refused.value.api_type == "authentication_error"


def test_revoked_keys_stop_working_at_once_everywhere(gm: Gitmem, workspace: Workspace) -> None:
    key, secret = gm.catalog.create_api_key(workspace.id, "temp")
    other_process = another_process(gm)
    assert other_process.authenticate(secret).credential_id == key.id
    revoked = gm.catalog.revoke_api_key(key.id)
    assert revoked.revoked_at is not None
    assert gm.catalog.revoke_api_key(key.id).revoked_at == revoked.revoked_at  # idempotent
    for catalog in (gm.catalog, other_process):
        with pytest.raises(AuthenticationFailed):
            catalog.authenticate(secret)
    with pytest.raises(NotFound):
        gm.catalog.revoke_api_key("apikey_missing")


def test_keys_made_by_another_process_work_at_once(gm: Gitmem, workspace: Workspace) -> None:
    other_process = another_process(gm)
    _, secret = other_process.create_api_key(workspace.id, "from the CLI")
    assert gm.catalog.authenticate(secret).workspace_id == workspace.id


def test_task_tokens_act_as_the_task(gm: Gitmem, workspace: Workspace) -> None:
    cred, token = gm.catalog.create_task_token(workspace.id, "task_01TASK")
    assert token.startswith("gm_tsk_") and token.encode() not in all_bytes(gm)
    principal = gm.catalog.authenticate(token)
    assert principal.actor == Actor("task_actor", "task_01TASK") and principal.task_id == "task_01TASK"
    assert cred.id == "task_01TASK"


def test_workspaces_are_isolated(gm: Gitmem) -> None:
    mine, theirs = gm.catalog.create_workspace("mine"), gm.catalog.create_workspace("theirs")
    info = gm.create_store(mine.id, "private")
    gm.store(mine.id, info.id).create("/secret-plan.md", "x")
    for call in (
        lambda: gm.get_store(theirs.id, info.id),
        lambda: gm.store(theirs.id, info.id),
        lambda: gm.update_store(theirs.id, info.id, name="pwned"),
        lambda: gm.archive_store(theirs.id, info.id),
        lambda: gm.delete_store(theirs.id, info.id),
    ):
        with pytest.raises(NotFound) as hidden:
            call()
        assert hidden.value.status == 404 and "not found" in hidden.value.message
    assert gm.list_stores(theirs.id).items == []
    assert [s.id for s in gm.list_stores(mine.id).items] == [info.id]
    assert gm.get_store(mine.id, info.id).name == "private"
    assert gm.store(mine.id, info.id).get_by_path("/secret-plan.md").content == "x"
    _, their_key = gm.catalog.create_api_key(theirs.id, "k")
    assert gm.catalog.authenticate(their_key).workspace_id == theirs.id


def test_the_real_limit_is_1000_shared_stores() -> None:
    # the home's own binding, which the tests below patch
    assert MAX_SHARED_STORES == 1000 and vars(home_module)["MAX_SHARED_STORES"] == 1000


def test_live_shared_stores_are_limited_and_worker_stores_do_not_count(
    gm: Gitmem, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(home_module, "MAX_SHARED_STORES", 3)
    shared = [gm.create_store(workspace.id, f"s{i}") for i in range(3)]
    stores_before = sorted(p.name for p in (gm.home / "stores").iterdir())
    with pytest.raises(LimitExceeded) as limit:
        gm.create_store(workspace.id, "one too many")
    assert limit.value.status == 400 and "3 live shared stores" in limit.value.message
    assert sorted(p.name for p in (gm.home / "stores").iterdir()) == stores_before  # no repository left behind
    workers = [gm.create_store(workspace.id, f"worker {i}", kind="worker") for i in range(5)]
    assert all(w.kind == "worker" for w in workers)
    other = gm.catalog.create_workspace("other")
    gm.create_store(other.id, "another workspace has its own count")
    gm.archive_store(workspace.id, shared[0].id)  # archiving frees a place
    freed = gm.create_store(workspace.id, "fits again")
    with pytest.raises(LimitExceeded):
        gm.create_store(workspace.id, "full again")
    gm.delete_store(workspace.id, freed.id)  # so does deleting
    gm.create_store(workspace.id, "fits once more")


def test_the_catalog_file_is_where_the_design_says(tmp_path: Path) -> None:
    gm = Gitmem.open(tmp_path / "home", database="")
    assert gm.catalog.path == tmp_path / "home" / "catalog.sqlite3" and gm.catalog.path.exists()
    assert (tmp_path / "home" / "stores").is_dir()
