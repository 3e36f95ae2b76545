"""PostgreSQL going away under write load (issue 28, item 11): the real server of tests/postgres.py
stopped as a crash would (``pg_ctl stop -m immediate``) while writers write through the app, then
started again. Every write that cannot reach it answers a retryable 503 with ``Retry-After`` within the
pool's few seconds (no 500, no 15 s wait), writes succeed again within moments of its return, and every
acknowledged write is there afterwards."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gitmem.db.postgres import POOL_WAIT_SECONDS
from gitmem.engine.gitmem import Gitmem
from tests import postgres
from tests.apps import in_process

WRITERS = 4


@dataclass(frozen=True)
class Answer:
    began: float
    ended: float
    status: int
    retry_after: str | None
    should_retry: str | None


def _wait_until(condition: Callable[[], bool], what: str, seconds: float = 30.0) -> float:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.01)
    return time.monotonic()


def test_a_crash_of_postgresql_mid_write_is_a_quick_503_and_loses_no_acknowledged_write(
    tmp_path: Path, pg_cluster: postgres.Cluster
) -> None:
    gm = Gitmem.open(tmp_path / "home", database=pg_cluster.fresh_database(), fsync="never")
    ws = gm.catalog.create_workspace("w")
    _, admin = gm.catalog.create_api_key(ws.id, "admin")
    answers: list[Answer] = []
    acknowledged: list[tuple[str, str]] = []  # (memory id, content)
    stop = threading.Event()
    with in_process(gm) as app:
        store = app.http(admin).post("/v1/memory_stores", json={"name": "load"}).json()["id"]

        def writer(number: int) -> None:
            http = app.http(admin)
            for i in range(100_000):
                if stop.is_set():
                    return
                content = f"writer {number} note {i}"
                began = time.monotonic()
                answer = http.post(
                    f"/v1/memory_stores/{store}/memories", json={"path": f"/w{number}/{i}.md", "content": content}
                )
                ended = time.monotonic()
                answers.append(
                    Answer(
                        began,
                        ended,
                        answer.status_code,
                        answer.headers.get("retry-after"),
                        answer.headers.get("x-should-retry"),
                    )
                )
                if answer.status_code == 200:
                    acknowledged.append((answer.json()["id"], content))
                else:
                    stop.wait(0.05)  # a client's pause before it retries

        threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(WRITERS)]
        for thread in threads:
            thread.start()
        try:
            _wait_until(lambda: len(acknowledged) >= 2 * WRITERS, "writes before the crash")
            crashed = time.monotonic()
            pg_cluster.pause("immediate")
            try:
                _wait_until(lambda: sum(a.began > crashed and a.status != 200 for a in answers) >= WRITERS, "refusals")
            finally:
                pg_cluster.resume()
            back = time.monotonic()
            first_ok = _wait_until(lambda: any(a.began > back and a.status == 200 for a in answers), "writes again")
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
        refused = [a for a in answers if a.status != 200]
        assert refused and {a.status for a in refused} == {503}, sorted({a.status for a in refused})
        assert all(a.retry_after == "1" and a.should_retry == "true" for a in refused)
        slowest = max(a.ended - a.began for a in refused)
        assert slowest < POOL_WAIT_SECONDS + 3, slowest  # the pool's wait, not the lock's 30 s
        print(f"503 within {slowest:.2f} s at most; writes again {first_ok - back:.2f} s after PostgreSQL was back")
        assert first_ok - back < 5  # the pool's own backoff (1, 2, 4, 8 s ...) left it failing for seconds
        reader = app.http(admin)
        for memory_id, content in acknowledged:
            answer = reader.get(f"/v1/memory_stores/{store}/memories/{memory_id}")
            assert answer.status_code == 200 and answer.json()["content"] == content, memory_id
    gm.close()
