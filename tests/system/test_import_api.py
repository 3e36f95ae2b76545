"""``gitmem import --from-api``: a store of a second, live gitmem (a real uvicorn on 127.0.0.1) read
through the official SDK, replayed here version for version, and resumed after SIGKILLs."""

from __future__ import annotations

import multiprocessing
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import pytest
from click.testing import CliRunner

from gitmem.cli import main
from gitmem.engine.fsck import check_store
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.engine.transfer.api_source import ApiSource
from gitmem.engine.transfer.journal import CRASH_ENV
from gitmem.engine.transfer.replay import run_import
from gitmem.model import Actor
from tests.checks import commit, no_sockets_left
from tests.server import RealServer

pytestmark = pytest.mark.slow
TASK = Actor("task_actor", "task_01TASKTASKTASKTASKTASKTAS")
NOTES, EDITS = 30, 2  # 30 notes written 3 times each, plus a move, a deletion and a redaction


@dataclass(frozen=True)
class Source:
    base_url: str
    admin: str
    store_id: str

    def client(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(api_key=self.admin, base_url=self.base_url, max_retries=2)


@pytest.fixture(scope="module")
def source(real_server: RealServer) -> Source:
    """A store on the live server with versions by a key (through the SDK), a user and a task."""
    gm = Gitmem.open(real_server.home, fsync="never")
    ws = gm.catalog.create_workspace("import-source")
    _, admin = gm.catalog.create_api_key(ws.id, "admin", role="admin")
    user, _ = gm.catalog.create_user(ws.id, "ana")
    ana = Actor("user_actor", user.id)
    live = Source(real_server.base_url, admin, "")
    client = live.client()
    made = client.beta.memory_stores.create(name="team-notes", description="What we learned", metadata={"t": "1"})
    first = client.beta.memory_stores.memories.create(made.id, path="/people/sam.md", content="Sam prefers staging.")
    store = gm.store(ws.id, made.id)  # the bulk through the library: quicker, and with other actors
    ids = [store.create(f"/notes/{i:02d}.md", f"note {i}", actor=ana if i % 2 else TASK).id for i in range(NOTES)]
    for edit in range(EDITS):
        for i, memory_id in enumerate(ids):
            store.update(memory_id, content=f"note {i}, edit {edit}", actor=TASK if i % 2 else ana)
    client.beta.memory_stores.memories.update(first.id, memory_store_id=made.id, path="/people/sam-k.md")
    client.beta.memory_stores.memories.delete(ids[0], memory_store_id=made.id)
    old = store.versions(memory_id=ids[1]).items[1]  # not the newest: that may not be redacted
    client.beta.memory_stores.memory_versions.redact(old.id, memory_store_id=made.id)
    return Source(real_server.base_url, admin, made.id)


def _actor(actor: Any) -> tuple[str, str] | None:
    """An actor as (gitmem's type, id), from the SDK's or the engine's."""
    if actor is None:
        return None
    if isinstance(actor, Actor):
        return (actor.type, actor.id)
    data = actor.model_dump()
    kind = "task_actor" if data["type"] == "session_actor" else data["type"]
    return (kind, next(str(v) for k, v in data.items() if k != "type"))


def listed(source: Source) -> list[tuple[Any, ...]]:
    """The source's versions as the SDK lists them, oldest first."""
    items = source.client().beta.memory_stores.memory_versions.list(source.store_id, limit=20, view="full")
    return [
        (v.id, v.memory_id, v.operation, v.path, v.content, v.content_sha256, v.created_at, _actor(v.created_by),
         v.redacted_at, _actor(v.redacted_by))
        for v in reversed(list(items))
    ]  # fmt: skip


def replayed(store: MemoryStore) -> list[tuple[Any, ...]]:
    versions, page = [], None
    while True:
        got = store.versions(limit=20, page=page, with_content=True)
        versions += got.items
        if (page := got.next_page) is None:
            break
    return [
        (v.id, v.memory_id, v.operation, v.path, v.content, v.content_sha256, v.created_at, _actor(v.created_by),
         v.redacted_at, _actor(v.redacted_by))
        for v in reversed(versions)
    ]  # fmt: skip


def test_an_import_through_the_sdk_reproduces_the_version_list(source: Source, tmp_path: Path) -> None:
    expected = listed(source)
    assert len(expected) == 1 + NOTES * (1 + EDITS) + 2  # the move and the deletion; a redaction adds none
    assert any(v[8] is not None for v in expected) and {v[7][0] for v in expected if v[7]} == {
        "api_actor",
        "user_actor",
        "task_actor",
    }
    gm = Gitmem.open(tmp_path / "home", fsync="never")
    ws = gm.catalog.create_workspace("copy")
    with ApiSource.connect(source.base_url, source.admin, source.store_id) as found:
        report = run_import(gm, ws.id, found)
    assert (report.imported, report.skipped) == (len(expected), 0)
    store = gm.store(ws.id, report.store_id)
    assert replayed(store) == expected  # ids, operations, paths, content, actors and times
    notes = source.client().beta.memory_stores.memories.list(source.store_id, view="full", limit=20)
    here = {n.path: (n.id, store.get(n.id).content, n.created_at, n.updated_at) for n in store.list(limit=100).items}  # type: ignore[union-attr]
    assert here == {n.path: (n.id, n.content, n.created_at, n.updated_at) for n in notes}  # type: ignore[union-attr]
    info = gm.catalog.store(report.store_id)
    assert (info.name, info.description, info.metadata) == ("team-notes", "What we learned", {"t": "1"})
    # The redacted version stays redacted: no path, no content, in the index and in the commit.
    redacted = next(v for v in store.versions(limit=100).items if v.redacted_at is not None)
    assert redacted.path is None and "Redacted-At: " in commit(store.repo[redacted.commit_id]).message


def test_the_cli_closes_the_sources_client(source: Source, tmp_path: Path) -> None:
    command = ["--home", str(tmp_path / "home"), "import", "--from-api", source.base_url, "--api-key-env", "SOURCE_KEY"]
    with no_sockets_left():  # a resumed import may list nothing: this one lists every version
        done = CliRunner().invoke(main, [*command, source.store_id, "-w", "copy"], env={"SOURCE_KEY": source.admin})
    assert done.exit_code == 0, done.output
    assert done.output.startswith(f"imported {len(listed(source))} versions into ")


def _import_and_die(home: Path, source: Source, crash_at: str) -> None:
    """In a forked child (the SDK is imported already): import until the crash point's SIGKILL."""
    os.environ[CRASH_ENV] = crash_at
    gm = Gitmem.open(home, fsync="never")
    ws = gm.catalog.workspace_by_name("copy") or gm.catalog.create_workspace("copy")
    run_import(gm, ws.id, ApiSource.connect(source.base_url, source.admin, source.store_id), batch=20)
    os._exit(0)  # not reached: the crash point kills the child first


def test_an_import_killed_while_listing_and_while_importing_resumes_and_ends_identical(
    source: Source, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    for crash_at in ("listing:40", "importing:60"):
        child = multiprocessing.get_context("fork").Process(target=_import_and_die, args=(home, source, crash_at))
        child.start()
        child.join(timeout=120)
        assert child.exitcode == -signal.SIGKILL
    command = ["--home", str(home), "import", "--from-api", source.base_url, "--api-key-env", "SOURCE_KEY"]
    done = CliRunner().invoke(main, [*command, source.store_id, "--batch-size", "20", "-w", "copy"],
                              env={"SOURCE_KEY": source.admin})  # fmt: skip
    assert done.exit_code == 0, done.output
    expected = listed(source)
    store_id = done.output.split(" into ")[1].split()[0]
    assert (
        done.output.strip() == f"imported {len(expected)} versions into {store_id} (60 were there from an earlier run)"
    )
    gm = Gitmem.open(home, fsync="never")
    ws = gm.catalog.workspace_by_name("copy")
    assert ws is not None and [s.id for s in gm.list_stores(ws.id).items] == [store_id]  # one store, not three
    assert replayed(gm.store(ws.id, store_id)) == expected
    assert not any((home / "imports").iterdir())  # the journal and its spool are gone
    report = check_store(gm.store(ws.id, store_id))  # git fsck, and the index against a rebuild from history
    assert report.ok, report.problems
