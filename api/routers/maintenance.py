"""``GET /v1/maintenance/retention``: what the scheduled pruner did last, for operators (admin keys)."""

from __future__ import annotations

import datetime as dt
import threading

from fastapi import APIRouter, Request

from gitmem.api.deps import Caller
from gitmem.api.schemas.common import ERROR_RESPONSES
from gitmem.api.schemas.maintenance import RetentionRun, StorePruned
from gitmem.engine.rewrite.retention import PruneReport
from gitmem.errors import PermissionDenied

router = APIRouter(prefix="/v1/maintenance", tags=["maintenance"], responses=ERROR_RESPONSES)


class RetentionStatus:
    """The scheduler's reports, kept per server process (the process that pruned the round has them)."""

    def __init__(self, interval_seconds: float) -> None:
        self.interval_seconds = interval_seconds
        self._lock = threading.Lock()
        self._rounds = 0
        self._last: tuple[dt.datetime, list[PruneReport]] | None = None

    def record(self, reports: list[PruneReport]) -> None:
        with self._lock:
            self._rounds += 1
            self._last = (dt.datetime.now(dt.UTC), reports)

    def view(self, workspace_id: str) -> RetentionRun:
        with self._lock:
            when, reports = self._last or (None, [])
            rounds = self._rounds
        return RetentionRun(
            interval_seconds=self.interval_seconds,
            rounds=rounds,
            last_round_at=when,
            stores=[
                StorePruned(
                    store_id=r.store_id,
                    retention=r.retention,
                    versions_before=r.versions_before,
                    versions_kept=r.versions_kept,
                    versions_dropped=len(r.dropped),
                    blobs_purged=len(r.blobs_purged),
                    seconds=round(r.seconds, 3),
                    skipped=r.skipped,
                    error=r.error,
                )
                for r in reports
                if r.workspace_id == workspace_id
            ],
        )


@router.get("/retention", response_model=RetentionRun, summary="The retention pruner's last round")
def retention_status(request: Request, principal: Caller) -> RetentionRun:
    if principal.role != "admin":
        raise PermissionDenied("only an admin key may see maintenance status")
    run: RetentionRun = request.app.state.retention.view(principal.workspace_id)
    return run
