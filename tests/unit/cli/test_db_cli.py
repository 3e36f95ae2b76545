"""``gitmem migrate``, ``gitmem db copy`` and the database settings: a bad one is one line, never a password."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
from click.testing import CliRunner

from gitmem.agents.tasks.tasks import tasks_for
from gitmem.cli import main
from gitmem.engine.gitmem import Gitmem
from gitmem.home_tables import home_migrations
from gitmem.webhooks.outbox import webhooks_for
from tests import REPO_ROOT


def run(*args: str, database: str | None = None) -> tuple[int, str]:
    env = {"GITMEM_DATABASE": database} if database else {}
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.output


def test_migrate_creates_the_schema_once(tmp_path: Path, postgres_url: str) -> None:
    home = str(tmp_path / "home")
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT to_regclass('public.tasks')").fetchone() == (None,)
    code, out = run("--home", home, "migrate", database=postgres_url)
    assert code == 0 and "up to date" in out
    code, out = run("--home", home, "migrate", "--check", database=postgres_url)
    assert code == 0 and "up to date" in out
    with psycopg.connect(postgres_url) as conn:
        (steps,) = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()  # type: ignore[misc]
        assert steps == len(home_migrations())
        assert conn.execute("SELECT to_regclass('public.tasks')").fetchone() != (None,)


def test_a_bad_database_setting_is_one_line_without_the_password(tmp_path: Path) -> None:
    for url, problem in (
        ("mysql://u:hunter2@h/db", "is not a postgresql:// URL"),
        ("postgresql://u:hunter2@h", "names no database"),
    ):
        code, out = run("--home", str(tmp_path), "store", "list", database=url)
        assert code == 2 and problem in out and "hunter2" not in out and len(out.strip().splitlines()) == 1
    code, out = run("--home", str(tmp_path), "serve", "--database", "postgresql://u:hunter2@127.0.0.1:1/db")
    assert code == 2 and "cannot open the database postgresql://u:***@127.0.0.1:1/db" in out and "hunter2" not in out


def _documented_copy(url: str) -> list[str]:
    """The ``gitmem db copy`` command docs/deploy.md gives, with ``url`` for its ``postgresql://...``."""
    [command] = re.findall(r"`gitmem (db copy [^`]*)`", (REPO_ROOT / "docs" / "deploy.md").read_text())
    assert isinstance(command, str)
    return command.replace("postgresql://...", url).split()


def test_db_copy_moves_a_homes_catalog_into_postgres(tmp_path: Path, postgres_url: str) -> None:
    home = tmp_path / "home"
    local = Gitmem.open(home, fsync="never", database="")
    ws = local.catalog.create_workspace("team")
    _, secret = local.catalog.create_api_key(ws.id, "agent")
    info = local.create_store(ws.id, "notes")
    local.store(ws.id, info.id).create("/a.md", "alpha")
    worker = tasks_for(local).create_worker(ws.id, "w")
    task, _ = tasks_for(local).create_task(ws.id, worker.id)
    tasks_for(local).append_event(task.id, "agent.message", {"text": "hi"})
    webhooks_for(local).create(ws.id, "https://example.com/hook", ["memory_store.created"])
    local.create_store(ws.id, "after the hook")  # an outbox event waiting for delivery
    local.close()

    code, out = run("--home", str(home), *_documented_copy(postgres_url))
    assert code == 0, out
    assert "stores: 3 rows" in out and "webhook_outbox: 1 rows" in out and "3 stores indexed" in out

    node = Gitmem.open(home, fsync="never", database=postgres_url)
    try:
        assert node.catalog.authenticate(secret).workspace_id == ws.id
        assert node.store(ws.id, info.id).get_by_path("/a.md").content == "alpha"
        assert [e.type for e in tasks_for(node).list_events(task.id).items] == ["agent.message"]
        assert node.catalog.db.execute("SELECT count(*) FROM webhook_deliveries").fetchone()[0] == 1
        later = node.create_store(ws.id, "made on postgres")  # the outbox's counter moved past the copy
        assert node.catalog.db.execute("SELECT count(*) FROM webhook_outbox").fetchone()[0] == 2
        assert later.id in {s.id for s in node.list_stores(ws.id).items}
    finally:
        node.close()

    code, out = run("db", "copy", "--from", str(home), "--to", postgres_url)  # a home named by its folder
    assert code == 1 and "holds a catalog already" in out
    code, out = run("db", "copy", "--from", str(tmp_path / "nowhere"), "--to", postgres_url)
    assert code == 2 and "is not a folder" in out
