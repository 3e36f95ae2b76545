"""The server runs the retention pruner on a schedule and reports its last round to admins."""

from __future__ import annotations

import time
from pathlib import Path

from gitmem.api.settings import Settings
from gitmem.engine.gitmem import Gitmem
from tests.apps import in_process


def test_the_scheduled_pruner_runs_and_reports(tmp_path: Path) -> None:
    gm = Gitmem.open(tmp_path)
    ws = gm.catalog.create_workspace("w")
    _, admin = gm.catalog.create_api_key(ws.id, "admin")
    _, reader = gm.catalog.create_api_key(ws.id, "reader", role="read-only")
    store_id = gm.create_store(ws.id, "notes").id
    gm.store(ws.id, store_id).create("/a.md", "a")
    settings = Settings.defaults(prune_interval_seconds=0.5, dream_runner=False, webhook_delivery=False)
    with in_process(tmp_path, settings) as server, server.http(admin) as http, server.http(reader) as as_reader:
        url = "/v1/maintenance/retention"
        deadline = time.monotonic() + 20
        status = http.get(url).json()
        while status["rounds"] == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
            status = http.get(url).json()
        assert status["rounds"] >= 1 and status["interval_seconds"] == 0.5
        (pruned,) = [s for s in status["stores"] if s["store_id"] == store_id]
        assert pruned["retention"] == "30 days" and pruned["versions_dropped"] == 0 and pruned["error"] is None
        denied = as_reader.get(url)
        assert denied.status_code == 403 and denied.json()["error"]["type"] == "permission_error"
