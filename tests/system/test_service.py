"""Running it as a service, for real (issue 32): ``gitmem serve --workers 2`` with metrics and JSON logs.

One server for the module. A scripted load (writes, a 409, reads, a search, a key hammered into 429s,
two webhooks of which one fails) runs once; then ``/metrics`` parsed with prometheus_client's own
parser shows exactly the counts the load made, summed over both workers (each worker's own files
are read too, to show both served), a real Prometheus scrapes it and answers a PromQL query, the JSON
log is one object a line and holds no secret, query string or note content, and a person pushes
from a plain ``git clone`` with the address they registered.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from gitmem.cli.notes.clone import clone_store
from gitmem.engine.gitmem import Gitmem
from tests.git_client import client_environment
from tests.server import free_port, start_gitmem_serve, wait_healthy

TOKEN = "metrics-token-for-the-test-0123"
NOTE_ROUTE = "/v1/memory_stores/{memory_store_id}/memories"
SECRET_QUERY = "path_prefix=/query-marker-7c1f/"
NOTE_MARKER = "note-content-marker-93ad"
WRITES = 6
HAMMER = 50


class Hooks:
    """Two webhook receivers on loopback: one answers 204, one 500."""

    def __init__(self) -> None:
        self.delivered = 0
        hooks = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # the http.server API
                self.rfile.read(int(self.headers.get("content-length", 0)))
                ok = self.path == "/ok"
                hooks.delivered += ok
                self.send_response(204 if ok else 500)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"


@dataclass
class Served:
    base_url: str
    home: Path
    log: Path
    metrics_dir: Path
    admin: str
    user_id: str
    user: str
    other_user: str
    secrets: list[str]
    prometheus_port: int | None  # a real Prometheus scraping the server, if installed


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("service")
    home, log, metrics_dir, port = tmp / "home", tmp / "serve.log", tmp / "metrics", free_port()
    env = {
        **os.environ,
        "GITMEM_HOME": str(home),
        "GITMEM_FSYNC": "never",
        "GITMEM_METRICS_TOKEN": TOKEN,
        "GITMEM_METRICS_DIR": str(metrics_dir),
        "GITMEM_LOG_FORMAT": "json",
        "GITMEM_LOG_LEVEL": "INFO",
        "GITMEM_RATE_LIMIT_RPS": "1",
        "GITMEM_RATE_LIMIT_BURST": "20",
        "GITMEM_WEBHOOK_POLL": "0.1",
        "GITMEM_WEBHOOK_ALLOW_NETWORKS": "127.0.0.0/8",  # the receiver is on loopback
        "GITMEM_PRUNE_INTERVAL": "0",
        "GITMEM_DREAM_RUNNER": "off",
        "GITMEM_READY_MIN_FREE_BYTES": "0",
    }
    proc = start_gitmem_serve(port, env, log, "--workers", "2")
    base_url = f"http://127.0.0.1:{port}"
    prometheus = None
    try:
        wait_healthy(proc, base_url, log=lambda: log.read_text(errors="replace")[-4000:])
        prometheus = _start_prometheus(tmp / "prometheus", base_url)  # it starts up while the load runs
        admin = (home / "admin.key").read_text().strip()
        gm = Gitmem.open(home)
        workspace = gm.catalog.workspace_by_name("default")
        assert workspace is not None
        sam, sam_token = gm.catalog.create_user(workspace.id, "Sam")
        _, kim_token = gm.catalog.create_user(workspace.id, "Kim")
        gm.close()
        secrets = [admin, sam_token, kim_token, TOKEN]
        yield Served(
            base_url, home, log, metrics_dir, admin, sam.id, sam_token, kim_token, secrets, prometheus and prometheus[1]
        )
    finally:
        if prometheus is not None:
            prometheus[0].terminate()
            prometheus[0].wait(timeout=10)
        proc.terminate()
        proc.wait(timeout=30)


def _start_prometheus(folder: Path, base_url: str) -> tuple[subprocess.Popen[bytes], int] | None:
    """Debian's prometheus on loopback, scraping the server every 250 ms with the metrics token."""
    binary = shutil.which("prometheus")
    if binary is None:
        return None
    folder.mkdir()
    (folder / "token").write_text(TOKEN)
    (folder / "prometheus.yml").write_text(
        "global: {scrape_interval: 250ms}\n"
        "scrape_configs:\n"
        "  - job_name: gitmem\n"
        f"    authorization: {{credentials_file: {folder / 'token'}}}\n"
        f"    static_configs: [{{targets: ['{base_url.removeprefix('http://')}']}}]\n"
    )
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, port


def scrape(served: Served) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"{served.base_url}/metrics", headers={"authorization": f"Bearer {TOKEN}"}).raise_for_status().text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@dataclass
class Load:
    store_id: str
    limited: int  # 429s the hammered key met
    conflict_request_id: str
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def load(served: Served) -> Load:
    hooks = Hooks()
    # A fresh connection a request, so the kernel spreads them over both workers.
    fresh = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(base_url=served.base_url, headers={"x-api-key": served.admin}, limits=fresh) as client:
        store_id = client.post("/v1/memory_stores", json={"name": "ops"}).raise_for_status().json()["id"]
        for path in ("/ok", "/fails"):
            client.post(
                "/v1/webhooks", json={"url": hooks.url(path), "event_types": ["memory.created"]}
            ).raise_for_status()
        ids = []
        for n in range(WRITES):
            body = {"path": f"/notes/{n}.md", "content": f"{NOTE_MARKER} {n}"}
            ids.append(client.post(f"/v1/memory_stores/{store_id}/memories", json=body).raise_for_status().json()["id"])
        conflict = client.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/notes/0.md", "content": "x"})
        assert conflict.status_code == 409
        for memory_id in ids[:3]:
            client.get(f"/v1/memory_stores/{store_id}/memories/{memory_id}").raise_for_status()
        client.get(f"/v1/memory_stores/{store_id}/search?q=marker&{SECRET_QUERY}").raise_for_status()
    gm = Gitmem.open(served.home)
    workspace = gm.catalog.workspace_by_name("default")
    assert workspace is not None
    _, hammer = gm.catalog.create_api_key(workspace.id, "hammer", role="read-only")
    gm.close()
    served.secrets.append(hammer)
    with httpx.Client(base_url=served.base_url, headers={"x-api-key": hammer}, limits=fresh) as client:
        statuses = [client.get("/v1/memory_stores").status_code for _ in range(HAMMER)]
    assert set(statuses) == {200, 429}, statuses
    deadline = time.monotonic() + 20
    while True:  # the deliverer's rounds: every event to the good hook, at least one failure of the other
        samples = scrape(served)
        done = value(samples, "gitmem_webhook_deliveries_total", outcome="delivered") >= WRITES
        if done and value(samples, "gitmem_webhook_deliveries_total", outcome="failed") >= 1:
            break
        assert time.monotonic() < deadline, "the webhooks were not delivered in time"
        time.sleep(0.2)
    return Load(store_id, statuses.count(429), conflict.headers["request-id"], samples)


def test_metrics_show_what_the_load_did_across_both_workers(served: Served, load: Load) -> None:
    s = load.samples
    assert value(s, "gitmem_http_requests_total", method="POST", route=NOTE_ROUTE, status="200") == WRITES
    assert value(s, "gitmem_http_requests_total", method="POST", route=NOTE_ROUTE, status="409") == 1
    assert value(s, "gitmem_http_requests_total", method="GET", route="/v1/memory_stores", status="429") == load.limited
    assert value(s, "gitmem_http_requests_total", method="GET", route="/v1/memory_stores", status="200") == (
        HAMMER - load.limited
    )
    assert value(s, "gitmem_rate_limited_total") == load.limited
    assert value(s, "gitmem_writes_total", outcome="committed") == WRITES
    assert value(s, "gitmem_writes_total", outcome="refused") == 1
    assert value(s, "gitmem_write_batch_size_sum") == WRITES
    assert value(s, "gitmem_search_duration_seconds_count") == 1
    assert value(s, "gitmem_http_request_duration_seconds_count", method="POST", route=NOTE_ROUTE) == WRITES + 1
    assert value(s, "gitmem_webhook_deliveries_total", outcome="delivered") >= WRITES
    assert value(s, "gitmem_webhook_deliveries_total", outcome="failed") >= 1
    assert value(s, "gitmem_webhook_outbox_depth") >= 1  # the failing hook's events wait for their retry
    assert value(s, "gitmem_process_free_descriptors") > 0
    assert value(s, "gitmem_home_disk_free_bytes") > 0
    assert value(s, "gitmem_dreams", status="pending") == 0
    # No store id, name, path or key in any label.
    text = httpx.get(f"{served.base_url}/metrics", headers={"authorization": f"Bearer {TOKEN}"}).text
    assert load.store_id not in text and "/notes/" not in text and "ops" not in text.replace("gitmem_", "")
    # Both workers answered part of the load, each in its own files, and the scrape is their sum.
    per_worker: dict[str, float] = {}
    for db in served.metrics_dir.glob("counter_*.db"):
        merged = MultiProcessCollector.merge([str(db)])
        per_worker[db.stem] = sum(
            sample.value
            for family in merged
            for sample in family.samples
            if sample.name == "gitmem_http_requests_total"
            and sample.labels.get("route") == "/v1/memory_stores"
            and sample.labels.get("method") == "GET"
        )
    assert len(per_worker) == 2 and all(count > 0 for count in per_worker.values()), per_worker
    assert sum(per_worker.values()) == HAMMER


@pytest.mark.usefixtures("load")
def test_a_real_prometheus_scrapes_it(served: Served) -> None:
    if served.prometheus_port is None:
        pytest.skip("Debian's prometheus is not installed (`make prometheus` installs it; CI does)")
    api = f"http://127.0.0.1:{served.prometheus_port}/api/v1/query"
    query = f'sum(gitmem_http_requests_total{{route="{NOTE_ROUTE}",status="409"}})'
    deadline, answer = time.monotonic() + 30, None
    while time.monotonic() < deadline:
        try:
            body = httpx.get(api, params={"query": query}, timeout=2).json()
            if body["data"]["result"]:
                answer = body["data"]["result"][0]["value"][1]
                break
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    assert answer == "1", f"Prometheus answered {answer!r}"
    up = httpx.get(api, params={"query": 'up{job="gitmem"}'}).json()
    assert up["data"]["result"][0]["value"][1] == "1"


def test_the_json_log_holds_no_secret_query_or_content(served: Served, load: Load) -> None:
    text = served.log.read_text()
    lines = [line for line in text.splitlines() if line.startswith("{")]
    assert lines and all(isinstance(json.loads(line), dict) for line in lines)
    access = [json.loads(line) for line in lines if '"logger": "gitmem.access"' in line]
    conflict = next(line for line in access if line["request_id"] == load.conflict_request_id)
    assert conflict["route"] == NOTE_ROUTE and conflict["status"] == 409 and conflict["duration_ms"] > 0
    assert conflict["actor_type"] == "api_actor" and conflict["workspace_id"].startswith("wrkspc_")
    for needle in (*served.secrets, SECRET_QUERY, "query-marker", NOTE_MARKER):
        assert needle not in text, needle


def test_a_person_pushes_with_the_address_they_registered(served: Served, load: Load, tmp_path: Path) -> None:
    def as_user(token: str) -> httpx.Response:
        return httpx.post(
            f"{served.base_url}/v1/users/me/emails",
            json={"email": "sam@example.com"},
            headers={"authorization": f"Bearer {token}"},
        )

    as_user(served.user).raise_for_status()
    assert as_user(served.other_user).status_code == 409  # nobody else may claim it
    url = f"{served.base_url}/v1/memory_stores/{load.store_id}.git"
    env = client_environment("Sam Doe", "sam@example.com") | {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Bearer {served.user}",
    }

    def git(*args: str, cwd: Path) -> str:
        done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    git("clone", "-q", url, "work", cwd=tmp_path)
    work = tmp_path / "work"
    (work / "sam.md").write_text("Sam's own note\n")
    git("add", "sam.md", cwd=work)
    git("commit", "-qm", "a note of my own", cwd=work)
    git("push", "-q", "origin", "HEAD:main", cwd=work)
    assert git("log", "-1", "--format=%an <%ae>", cwd=work).strip() == "Sam Doe <sam@example.com>"
    with httpx.Client(base_url=served.base_url, headers={"x-api-key": served.admin}) as admin:
        notes = admin.get(f"/v1/memory_stores/{load.store_id}/memories").json()["data"]
        pushed = next(note for note in notes if note["path"] == "/sam.md")
        versions = admin.get(f"/v1/memory_stores/{load.store_id}/memory_versions", params={"memory_id": pushed["id"]})
    assert versions.json()["data"][0]["created_by"] == {"type": "user_actor", "user_id": served.user_id}
    # gitmem clone sets that identity in a clone of its own.
    cloned = clone_store(load.store_id, tmp_path / "cloned", base_url=served.base_url, token=served.user)
    assert git("config", "user.email", cwd=cloned).strip() == "sam@example.com"
