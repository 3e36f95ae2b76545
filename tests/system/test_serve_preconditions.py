"""A real `gitmem serve --workers 2` on a busy CPU: 12 threads do read-modify-write with content_sha256
preconditions on one note (and read it in between). Every answer is a success or a precondition
failure, never a 5xx, every update that was answered as landed is in the note exactly once and in its
thread's order, and at GITMEM_LOG_LEVEL=WARNING the log has no line a request."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from gitmem.engine.fsck import check_store
from gitmem.engine.gitmem import Gitmem
from tests.server import free_port, start_gitmem_serve, wait_healthy
from tests.system.test_crash import wait_for_packers

pytestmark = pytest.mark.slow  # a real multi-worker server, CPU burners

THREADS = 12
UPDATES = 3
BUSY = "while True: pass"


def test_no_5xx_from_two_workers_under_racing_updates(tmp_path: Path) -> None:
    home, port, log = tmp_path / "home", free_port(), tmp_path / "serve.log"
    env = {
        **os.environ,
        "GITMEM_HOME": str(home),
        "GITMEM_PRUNE_INTERVAL": "0",
        "GITMEM_RATE_LIMIT_RPS": "0",
        "GITMEM_DREAM_RUNNER": "off",
        "GITMEM_LOG_LEVEL": "WARNING",
    }
    server = start_gitmem_serve(port, env, log, "--workers", "2")
    base_url = f"http://127.0.0.1:{port}"
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    burners: list[subprocess.Popen[bytes]] = []
    try:
        wait_healthy(server, base_url, log=log.read_text)
        # The CPU is busy while the updates race (not while the workers start: that proves nothing).
        burners = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(2)]
        assert httpx.get(f"{base_url}/healthz?api_key=gm_key_probe").status_code == 200
        headers = {"x-api-key": (home / "admin.key").read_text().strip()}
        with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
            store_id = client.post("/v1/memory_stores", json={"name": "race"}).json()["id"]
            notes = f"/v1/memory_stores/{store_id}/memories"
            note_id = client.post(notes, json={"path": "/shared.md", "content": ""}).json()["id"]

        def work(me: int) -> None:
            with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
                for i in range(UPDATES):
                    while True:
                        read = client.get(f"{notes}/{note_id}")
                        statuses[read.status_code] += 1
                        if read.status_code != 200:
                            failures.append(f"GET {read.status_code} {read.text[:200]}")
                            return
                        current = read.json()
                        wrote = client.post(
                            f"{notes}/{note_id}",
                            json={
                                "content": current["content"] + f"t{me} {i}\n",
                                "precondition": {"type": "content_sha256", "content_sha256": current["content_sha256"]},
                            },
                        )
                        statuses[wrote.status_code] += 1
                        if wrote.status_code == 200:
                            break
                        if wrote.status_code != 409:
                            failures.append(f"POST {wrote.status_code} {wrote.text[:200]}")
                            return

        threads = [threading.Thread(target=work, args=(me,)) for me in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=240)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
        server.terminate()
        server.wait(timeout=30)
    output = log.read_text()
    assert failures == [], output[-3000:]
    assert set(statuses) <= {200, 409}, statuses
    assert "Traceback" not in output, output[-3000:]
    # GITMEM_LOG_LEVEL=WARNING: no access line, and nothing of the key (tests/system/test_serve.py reads
    # the access log at INFO, without query strings).
    assert "HTTP/1.1" not in output and "gm_key_probe" not in output, output[-3000:]
    gm = Gitmem.open(home)
    store = next(gm.store(s.workspace_id, s.id) for s in gm.all_stores() if s.id == store_id)
    lines = (store.get(note_id).content or "").splitlines()
    assert sorted(lines) == sorted(f"t{me} {i}" for me in range(THREADS) for i in range(UPDATES))
    for me in range(THREADS):
        assert [line for line in lines if line.startswith(f"t{me} ")] == [f"t{me} {i}" for i in range(UPDATES)]
    time.sleep(1)  # a background packer the server started takes its lock once its process is up
    wait_for_packers(store.path)  # a repack deletes packs that git fsck is reading
    assert check_store(store).ok
