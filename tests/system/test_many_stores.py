"""Thousands of stores under a small open-file limit (issue 27): a real server under ``prlimit
--nofile=256`` touches 1,000 stores (writes, reads, searches, pushes with the real git client through
the stores' hooks) while a second process prunes the same home under the same limit, with no error and
both processes' descriptors, read from /proc/<pid>/fd, bounded throughout."""

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
PUSHED = (7, 301, 602, 903)  # stores pushed to, once the cache has evicted them (far apart in the list)
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
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except FileNotFoundError:  # the process has ended
        return 0


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
    peak = {served.pid: empty, pruner.pid: 0}
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            for pid in peak:
                peak[pid] = max(peak[pid], descriptors(pid))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        headers = {"x-api-key": served.key}
        limits = httpx.Limits(max_connections=8)
        with httpx.Client(base_url=served.base_url, headers=headers, timeout=60, limits=limits) as client:
            with ThreadPoolExecutor(8) as pool:
                results = list(pool.map(lambda p: touch(client, p[1], p[0]), enumerate(served.store_ids)))
            # Pushes with the real git client, at once, to stores the cache evicted long ago: each runs
            # the store's pre- and post-receive hooks (gitmem hook) under the server's limit.
            with ThreadPoolExecutor(len(PUSHED)) as pool:
                pushes = list(pool.map(lambda n: push_a_note(served, tmp_path, n), PUSHED))
            pushed = [
                client.get(f"/v1/memory_stores/{served.store_ids[n]}/memories", params={"path_prefix": "/"})
                for n in PUSHED
            ]
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
    assert [p.returncode for p in pushes] == [0] * len(PUSHED), [p.stderr for p in pushes]
    for answer in pushed:  # each push reached its store's index through the hooks
        assert answer.status_code == 200
        assert "/pushed.md" in [m["path"] for m in answer.json()["data"]], answer.json()
    assert pruner.returncode == 0, err[-2000:]
    assert out.count("memstore_") >= STORES  # it saw every store
    # Bounded: never near the limit, and 1,000 stores touched leave about what an empty server has
    # plus the cache's capacity.
    assert peak[served.pid] < LIMIT - 32, peak
    assert 0 < peak[pruner.pid] < LIMIT - 32, peak
    capacity = metric(served, "gitmem_open_stores")
    assert capacity <= 32
    assert metric(served, "gitmem_store_evictions_total") > 0
    assert descriptors(served.pid) <= empty + 5 * 32 + 16
    assert metric(served, "gitmem_process_free_descriptors") > 32
    # The same figures in the readiness probe, as the process sees them under its limit.
    ready = httpx.get(f"{served.base_url}/readyz", timeout=30).json()["stores"]
    assert ready["descriptor_limit"] == LIMIT
    assert ready["evictions"] > 0 and ready["open"] <= ready["capacity"] <= 32
    assert 32 < ready["free_descriptors"] < LIMIT


def push_a_note(served: Served, tmp_path: Path, n: int) -> subprocess.CompletedProcess[str]:
    """Clone store ``n`` over HTTP, add a note, push it."""
    env = client_environment("pusher", f"{served.user_id}@user.gitmem")
    url = f"{served.base_url}/v1/memory_stores/{served.store_ids[n]}.git"
    header = ["-c", f"http.extraHeader=Authorization: Bearer {served.user_secret}"]
    work = tmp_path / f"work{n}"
    subprocess.run(["git", *header, "clone", "-q", url, str(work)], env=env, check=True, capture_output=True)
    (work / "pushed.md").write_text("pushed through Git\n")
    subprocess.run(["git", "-C", str(work), "add", "pushed.md"], env=env, check=True)
    subprocess.run(["git", "-C", str(work), "commit", "-qm", "a pushed note"], env=env, check=True)
    return subprocess.run(
        ["git", "-C", str(work), *header, "push", "-q", "origin", "HEAD:main"], env=env, capture_output=True, text=True
    )
