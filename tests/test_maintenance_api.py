"""The server runs the retention pruner on a schedule and reports its last round to admins."""

from __future__ import annotations

import time

import httpx

from gitmem.home import Gitmem
from tests.server import serve


def test_the_scheduled_pruner_runs_and_reports(tmp_path) -> None:
    gm = Gitmem.open(tmp_path)
    ws = gm.catalog.create_workspace("w")
    _, admin = gm.catalog.create_api_key(ws.id, "admin")
    _, reader = gm.catalog.create_api_key(ws.id, "reader", role="read-only")
    store_id = gm.create_store(ws.id, "notes").id
    gm.store(ws.id, store_id).create("/a.md", "a")
    with serve(tmp_path, env={"GITMEM_PRUNE_INTERVAL": "0.5"}) as base_url:
        url = f"{base_url}/v1/maintenance/retention"
        deadline = time.monotonic() + 20
        status = httpx.get(url, headers={"x-api-key": admin}).json()
        while status["rounds"] == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
            status = httpx.get(url, headers={"x-api-key": admin}).json()
        assert status["rounds"] >= 1 and status["interval_seconds"] == 0.5
        (pruned,) = [s for s in status["stores"] if s["store_id"] == store_id]
        assert pruned["retention"] == "30 days" and pruned["versions_dropped"] == 0 and pruned["error"] is None
        denied = httpx.get(url, headers={"x-api-key": reader})
        assert denied.status_code == 403 and denied.json()["error"]["type"] == "permission_error"
