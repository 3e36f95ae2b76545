"""A real `gitmem serve --workers 2` on a busy CPU: 12 threads do read-modify-write with content_sha256
preconditions on one note (and read it in between). Every answer is a success or a precondition
failure, never a 5xx, and every update that was answered as landed is in the note exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from gitmem.engine.fsck import check_store
from gitmem.engine.home import Gitmem
from tests.server import free_port
from tests.test_crash import wait_for_packers

THREADS = 12
UPDATES = 3
BUSY = "while True: pass"


def test_no_5xx_from_two_workers_under_racing_updates(tmp_path: Path) -> None:
    home, port = tmp_path / "home", free_port()
    env = {
        **os.environ,
        "GITMEM_HOME": str(home),
        "GITMEM_PRUNE_INTERVAL": "0",
        "GITMEM_RATE_LIMIT_RPS": "0",
        "GITMEM_DREAM_RUNNER": "off",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "gitmem.cli", "serve", "--port", str(port), "--workers", "2"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    burners = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(2)]  # the CPU is busy
    base_url = f"http://127.0.0.1:{port}"
    failures: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base_url}/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
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
        _, stderr = server.communicate(timeout=30)
    assert failures == [], stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    gm = Gitmem.open(home)
    store = next(gm.store(s.workspace_id, s.id) for s in gm.all_stores() if s.id == store_id)
    lines = (store.get(note_id).content or "").splitlines()
    assert sorted(lines) == sorted(f"t{me} {i}" for me in range(THREADS) for i in range(UPDATES))
    for me in range(THREADS):
        assert [line for line in lines if line.startswith(f"t{me} ")] == [f"t{me} {i}" for i in range(UPDATES)]
    time.sleep(1)  # a background packer the server started takes its lock once its process is up
    wait_for_packers(store.path)  # a repack deletes packs that git fsck is reading
    assert check_store(store).ok
