"""The web view's page times on a big store, beside a plain API listing of the same data.

    python -m bench.ui [--notes 10000] [--versions 1000] [--rounds 30] [--quick]

A store of N notes (made in one commit, as ``bench.search`` does: 100 folders of N/100 notes) and one
note with V versions, the last V/2 of them pending review. Each page is fetched in process (httpx's
ASGI transport: the server's whole work, no network) ROUNDS times, alternating with the baseline,
``GET /v1/memory_stores/{id}/memories?limit=100`` (a plain API listing of one page). Printed: each
page's median in ms and its ratio to the baseline. Target: every page <= 100 ms.

Timings on a shared machine are noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

from bench.search import build_store
from gitmem.agents.review.review import Reviews
from gitmem.agents.tasks.tasks import tasks_for
from gitmem.api.app import create_app
from gitmem.engine.gitmem import Gitmem

TARGET_MS = 100.0


def _timed_ms(client: TestClient, url: str, headers: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    response = client.get(url, headers=headers or {})
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, f"{url}: {response.status_code} {response.text[:300]}"
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--versions", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="1,000 notes, 100 versions, 5 rounds")
    args = parser.parse_args()
    if args.quick:
        args.notes, args.versions, args.rounds = 1_000, 100, 5
    with tempfile.TemporaryDirectory() as tmp:
        gm = Gitmem.open(Path(tmp) / "home", fsync="never")
        ws = gm.catalog.create_workspace("bench")
        _, admin = gm.catalog.create_api_key(ws.id, "admin")
        store, _ = build_store(gm, ws.id, args.notes - 1)  # and the busy note: a store holds at most 10,000
        note = store.create("/history/busy.md", "version 0\n")
        for i in range(1, args.versions):
            if i == args.versions // 2:
                Reviews.of(gm).configure(ws.id, store.id, enabled=True)
            store.update(note.id, f"version {i}\nline two\n")
        tasks_for(gm)  # the task tables, as on a server
        pages = {
            "stores": "/ui/",
            "store root (100 folders)": f"/ui/stores/{store.id}",
            f"folder of {args.notes // 100} notes": f"/ui/stores/{store.id}?path=/topic-07/",
            f"note with {args.versions} versions": f"/ui/stores/{store.id}/notes/{note.id}",
            "diff (unified)": f"/ui/stores/{store.id}/versions/{note.version_id}",
            "diff (side by side)": f"/ui/stores/{store.id}/versions/{note.version_id}?mode=split",
            "activity": f"/ui/stores/{store.id}/activity",
            f"review ({args.versions // 2} pending)": f"/ui/stores/{store.id}/review",
            "search": f"/ui/stores/{store.id}?q=terraform",
        }
        baseline_url = f"/v1/memory_stores/{store.id}/memories?limit=100"
        key = {"x-api-key": admin}
        with TestClient(create_app(gm)) as client:
            form = client.get("/ui/sign-in").text  # the form's token, bound to its pre-session cookie
            token = form.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
            client.post("/ui/sign-in", data={"secret": admin, "csrf_token": token})
            for url in [*pages.values(), baseline_url]:  # warm caches (index catch-up, templates)
                _timed_ms(client, url, key)
            times: dict[str, list[float]] = {name: [] for name in pages}
            baseline: list[float] = []
            for _ in range(args.rounds):
                baseline.append(_timed_ms(client, baseline_url, key))
                for name, url in pages.items():
                    times[name].append(_timed_ms(client, url))
        base = statistics.median(baseline)
        print(f"{args.notes} notes, a note of {args.versions} versions, {args.rounds} rounds; in process")
        print(f"{'page':<32} {'median ms':>10} {'x listing':>10}  target <= {TARGET_MS:.0f} ms")
        print(f"{'API listing (baseline)':<32} {base:>10.1f} {1.0:>10.2f}")
        for name, values in times.items():
            median = statistics.median(values)
            flag = "" if median <= TARGET_MS else "  OVER"
            print(f"{name:<32} {median:>10.1f} {median / base:>10.2f}{flag}")


if __name__ == "__main__":
    main()
