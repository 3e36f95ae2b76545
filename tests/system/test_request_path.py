"""The HTTP request path across processes: revocation seen at once, and catalog transactions that
threads cannot end or see for each other. (No 5xx under contended read-modify-write on ``gitmem serve
--workers 2`` with the CPU busy: tests/system/test_serve_preconditions.py.)"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gitmem.api.app import create_app
from gitmem.api.settings import Settings
from gitmem.engine.catalog.catalog import CatalogBusy
from gitmem.engine.gitmem import Gitmem


def test_a_key_revoked_elsewhere_fails_on_the_next_request(tmp_path: Path) -> None:
    """The app authenticates on its event loop without a cache: a revocation committed through another
    catalog connection (as by another process) counts on the very next request."""
    gm = Gitmem.open(tmp_path / "home")
    workspace = gm.catalog.create_workspace("w")
    cred, secret = gm.catalog.create_api_key(workspace.id, "k")
    with TestClient(create_app(gm, Settings.defaults(prune_interval_seconds=0, dream_runner=False))) as client:
        assert client.get("/v1/memory_stores", headers={"x-api-key": secret}).status_code == 200
        Gitmem.open(tmp_path / "home").catalog.revoke(cred.id)
        answer = client.get("/v1/memory_stores", headers={"x-api-key": secret})
    assert answer.status_code == 401 and answer.json()["error"]["type"] == "authentication_error"


def test_catalog_transactions_are_per_thread(tmp_path: Path) -> None:
    """A thread's open transaction is invisible to another thread, and its rollback ends only its own
    work: each thread has its own connection."""
    gm = Gitmem.open(tmp_path / "home")
    opened, checked = threading.Event(), threading.Event()
    seen: list[list[str]] = []

    def writer() -> None:
        try:
            with gm.catalog.transaction() as db:
                db.execute("INSERT INTO workspaces (id, name, created_at) VALUES ('wrkspc_x', 'pending', 0)")
                opened.set()
                checked.wait(10)
                raise RuntimeError("roll back")
        except RuntimeError:
            pass

    thread = threading.Thread(target=writer)
    thread.start()
    assert opened.wait(10)
    seen.append([w.name for w in gm.catalog.list_workspaces()])  # while the other thread's transaction is open
    checked.set()
    kept = gm.catalog.create_workspace("kept")  # waits for the other's lock, then commits on its own
    thread.join()
    seen.append([w.name for w in gm.catalog.list_workspaces()])
    assert seen == [[], ["kept"]] and gm.catalog.workspace(kept.id).name == "kept"


def test_reads_without_waiting_refuse_to_write_and_leave_nothing(tmp_path: Path) -> None:
    """What the event loop may do with the catalog: read; a write (or a busy database) raises
    CatalogBusy, to be redone where waiting is allowed, and changes nothing."""
    gm = Gitmem.open(tmp_path / "home")
    workspace = gm.catalog.create_workspace("w")
    with gm.catalog.without_waiting():
        assert gm.catalog.workspace(workspace.id).name == "w"
    with pytest.raises(CatalogBusy), gm.catalog.without_waiting():
        gm.catalog.create_workspace("refused")
    assert [w.name for w in gm.catalog.list_workspaces()] == ["w"]
    assert gm.catalog.create_workspace("later").name == "later"  # the thread's own connection again


def test_the_access_log_drops_query_strings() -> None:
    """uvicorn logs the path with its query; a secret sent as ``?api_key=`` must not reach the log."""
    import logging

    from gitmem.cli.node.serve import DropQueryString, uvicorn_options

    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", "/v1/memory_stores?api_key=gm_key_secret", "1.1", 200),
        None,
    )
    assert DropQueryString().filter(record)
    assert record.getMessage() == '127.0.0.1:5000 - "GET /v1/memory_stores HTTP/1.1" 200'
    options = uvicorn_options()
    assert options["log_config"]["handlers"]["access"]["filters"] == ["drop_query"]
    assert options["log_level"] == "info" and uvicorn_options("text", "WARNING")["log_level"] == "warning"
    assert options["http"] in ("httptools", "h11") and options["loop"] in ("uvloop", "asyncio")
