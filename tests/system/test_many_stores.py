"""Thousands of stores under a small open-file limit (issue 27): a real server under ``prlimit
--nofile=256`` touches 1,000 stores (writes, reads, searches, a push) while a second process prunes
the same home under the same limit, with no error and the server's descriptors, read from
/proc/<pid>/fd, bounded throughout."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from gitmem.engine.gitmem import Gitmem
from tests.git_client import client_environment
from tests.server import REAL_SERVER_ENV, serve

pytestmark = pytest.mark.slow

LIMIT = 256
STORES = 1000
PRLIMIT = ["prlimit", f"--nofile={LIMIT}:{LIMIT}", "--"]
METRICS_TOKEN = "many-stores-metrics"


@dataclass(frozen=True)
class Served:
    home: Path
    base_url: str
    pid: int
    key: str
    user_secret: str  # Git pushes as a user
    user_id: str
    store_ids: list[str]


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("many-stores") / "home"
    gm = Gitmem.open(home, fsync="never")
    ws = gm.catalog.create_workspace("many").id
    _, key = gm.catalog.create_api_key(ws, "admin")
    user, user_secret = gm.catalog.create_user(ws, "pusher")
    store_ids = [gm.create_store(ws, f"s{i:04}").id for i in range(STORES)]
    gm.close()
    started: list[subprocess.Popen[bytes]] = []
    env = REAL_SERVER_ENV | {"GITMEM_METRICS_TOKEN": METRICS_TOKEN}
    with serve(home, env=env, prefix=PRLIMIT, started=started) as base_url:
        yield Served(home, base_url, started[-1].pid, key, user_secret, user.id, store_ids)


def touch(client: httpx.Client, store_id: str, n: int) -> list[int]:
    """A write, a read and (every tenth store) a search; the statuses."""
    base = f"/v1/memory_stores/{store_id}"
    statuses = [client.post(f"{base}/memories", json={"path": "/a.md", "content": f"note {n} kiwi"}).status_code]
    statuses.append(client.get(f"{base}/memories", params={"path_prefix": "/"}).status_code)
    if n % 10 == 0:
        statuses.append(client.get(f"{base}/search", params={"q": "kiwi"}).status_code)
    return statuses


def metric(served: Served, name: str) -> float:
    text = httpx.get(
        f"{served.base_url}/metrics", headers={"authorization": f"Bearer {METRICS_TOKEN}"}, timeout=30
    ).text
    found = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    assert found, f"{name} not in /metrics"
    return float(found.group(1))


def test_a_server_under_256_open_files_touches_1000_stores(served: Served, tmp_path: Path) -> None:
    empty = descriptors(served.pid)
    peak = [empty]
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            peak[0] = max(peak[0], descriptors(served.pid))

    watcher = threading.Thread(target=watch)
    watcher.start()
    # A second process under the same limit: the pruner visits every store of the home meanwhile.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITMEM_")}
    env |= {"GITMEM_HOME": str(served.home), "GITMEM_FSYNC": "never"}
    pruner = subprocess.Popen(
        [*PRLIMIT, sys.executable, "-m", "gitmem.cli", "prune"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        headers = {"x-api-key": served.key}
        limits = httpx.Limits(max_connections=8)
        with httpx.Client(base_url=served.base_url, headers=headers, timeout=60, limits=limits) as client:
            with ThreadPoolExecutor(8) as pool:
                results = list(pool.map(lambda p: touch(client, p[1], p[0]), enumerate(served.store_ids)))
            push = push_a_note(served, tmp_path)
            # Every store read once more, after the whole lot was touched.
            with ThreadPoolExecutor(8) as pool:
                again = list(
                    pool.map(lambda s: client.get(f"/v1/memory_stores/{s}/memories").status_code, served.store_ids)
                )
        out, err = pruner.communicate(timeout=300)
    finally:
        stop.set()
        watcher.join()
        if pruner.poll() is None:
            pruner.kill()
    statuses = [s for r in results for s in r] + again
    assert statuses.count(200) == len(statuses), sorted(set(statuses))
    assert len(statuses) == 3 * STORES + STORES // 10
    assert push.returncode == 0, push.stderr
    assert pruner.returncode == 0, err[-2000:]
    assert out.count("memstore_") >= STORES  # it saw every store
    # Bounded: never near the limit, and 1,000 stores touched leave about what an empty server has
    # plus the cache's capacity.
    assert peak[0] < LIMIT - 32, peak[0]
    capacity = metric(served, "gitmem_open_stores")
    assert capacity <= 32
    assert metric(served, "gitmem_store_evictions_total") > 0
    assert descriptors(served.pid) <= empty + 5 * 32 + 16
    assert metric(served, "gitmem_process_free_descriptors") > 32


def push_a_note(served: Served, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Clone one of the stores over HTTP, add a note, push it."""
    env = client_environment("pusher", f"{served.user_id}@user.gitmem")
    url = f"{served.base_url}/v1/memory_stores/{served.store_ids[7]}.git"
    header = ["-c", f"http.extraHeader=Authorization: Bearer {served.user_secret}"]
    work = tmp_path / "work"
    subprocess.run(["git", *header, "clone", "-q", url, str(work)], env=env, check=True, capture_output=True)
    (work / "pushed.md").write_text("pushed through Git\n")
    subprocess.run(["git", "-C", str(work), "add", "pushed.md"], env=env, check=True)
    subprocess.run(["git", "-C", str(work), "commit", "-qm", "a pushed note"], env=env, check=True)
    return subprocess.run(
        ["git", "-C", str(work), *header, "push", "-q", "origin", "HEAD:main"], env=env, capture_output=True, text=True
    )
