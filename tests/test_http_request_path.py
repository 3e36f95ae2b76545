"""The HTTP request path under load and across processes: no 5xx under contended read-modify-write on
``gitmem serve --workers 2`` with the CPU busy, revocation seen at once, and catalog transactions that
threads cannot end or see for each other."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from gitmem.api.app import create_app
from gitmem.api.settings import Settings
from gitmem.engine.catalog import CatalogBusy
from gitmem.engine.home import Gitmem
from tests.server import free_port

THREADS = 12
ROUNDS = 10


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``gitmem serve --workers 2`` on an empty home: (base URL, admin key)."""
    home, port = tmp_path / "home", free_port()
    env = {
        **os.environ,
        "GITMEM_HOME": str(home),
        "GITMEM_PRUNE_INTERVAL": "0",
        "GITMEM_RATE_LIMIT_RPS": "0",
        "GITMEM_DREAM_RUNNER": "off",
        "GITMEM_LOG_LEVEL": "WARNING",
    }
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "gitmem.cli", "serve", "--port", str(port), "--workers", "2"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _healthy(base_url):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield base_url, (home / "admin.key").read_text().strip()
    finally:
        server.terminate()
        server.wait(timeout=30)
    output = log.read_text()
    assert "Traceback" not in output, output
    assert "GET /healthz HTTP/1.1" in output and "gm_key_probe" not in output  # access log, no query strings


def _healthy(base_url: str) -> bool:
    try:
        return httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def busy_cpu() -> Iterator[None]:
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def test_contended_read_modify_write_on_two_workers_answers_no_5xx(served: tuple[str, str], busy_cpu: None) -> None:
    """12 threads append their own lines to one note with content_sha256 preconditions: every answer
    is a success or a precondition failure, and every line whose write succeeded is in the note."""
    base_url, key = served
    headers = {"x-api-key": key}
    assert httpx.get(f"{base_url}/healthz?api_key=gm_key_probe").status_code == 200
    store = httpx.post(f"{base_url}/v1/memory_stores", json={"name": "rmw"}, headers=headers).json()["id"]
    url = f"{base_url}/v1/memory_stores/{store}/memories"
    note = httpx.post(url, json={"path": "/log.md", "content": "start\n"}, headers=headers).json()["id"]
    statuses: Counter[int] = Counter()
    landed: list[str] = []
    lock = threading.Lock()

    def append(thread: int) -> None:
        with httpx.Client(headers=headers, timeout=60) as client:
            for i in range(ROUNDS):
                current = client.get(f"{url}/{note}")
                line = f"t{thread}-{i}\n"
                answer = (
                    client.post(
                        f"{url}/{note}",
                        json={
                            "content": current.json()["content"] + line,
                            "precondition": {
                                "type": "content_sha256",
                                "content_sha256": current.json()["content_sha256"],
                            },
                        },
                    )
                    if current.status_code == 200
                    else current
                )
                with lock:
                    statuses[current.status_code] += 1
                    statuses[answer.status_code] += 1
                    if answer.status_code == 200:
                        landed.append(line)

    threads = [threading.Thread(target=append, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert not [s for s in statuses if s >= 500], statuses
    assert set(statuses) <= {200, 409}, statuses
    assert landed, statuses  # some writes won their race
    final = httpx.get(f"{url}/{note}", headers=headers).json()["content"]
    assert sorted(final.splitlines()[1:]) == sorted(line.strip() for line in landed)  # no lost update


def test_a_key_revoked_elsewhere_fails_on_the_next_request(tmp_path: Path) -> None:
    """The app authenticates on its event loop without a cache: a revocation committed through another
    catalog connection (as by another process) counts on the very next request."""
    gm = Gitmem.open(tmp_path / "home")
    workspace = gm.catalog.create_workspace("w")
    cred, secret = gm.catalog.create_api_key(workspace.id, "k")
    with TestClient(create_app(gm, Settings(prune_interval_seconds=0, dream_runner=False))) as client:
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

    from gitmem.cli.serve import DropQueryString, uvicorn_options

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
    assert options["http"] in ("httptools", "h11") and options["loop"] in ("uvloop", "asyncio")
