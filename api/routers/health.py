"""The probes, without auth: liveness (``/healthz``: the process answers) and readiness (``/readyz``:
it can take work; :mod:`gitmem.engine.readiness`, and not draining)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from gitmem.api.draining import RETRY_AFTER_SECONDS, Drain
from gitmem.api.schemas.common import Health
from gitmem.api.schemas.health import OpenStores, Readiness
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.readiness import ReadinessProbe

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, summary="Liveness check")
def healthz() -> Health:
    return Health()


@router.get(
    "/readyz",
    response_model=Readiness,
    summary="Readiness check",
    responses={503: {"model": Readiness, "description": "Not ready: take this server out of rotation"}},
)
async def readyz(request: Request) -> JSONResponse:
    probe: ReadinessProbe = request.app.state.readiness
    drain: Drain = request.app.state.drain
    state = await run_in_threadpool(probe.check)
    failing = {check.name: check.reason for check in state.failing}
    if drain.draining:
        failing["draining"] = "this server is stopping"
    stores = _open_stores(request.app.state.gm)
    if failing:
        body = Readiness(status="unready", failing=failing, stores=stores)
        return JSONResponse(body.model_dump(), status_code=503, headers={"retry-after": str(RETRY_AFTER_SECONDS)})
    return JSONResponse(Readiness(status="ready", stores=stores).model_dump())


def _open_stores(gm: Gitmem) -> OpenStores:
    s = gm.open_stores()
    return OpenStores(
        open=s.open_stores,
        in_use=s.in_use,
        capacity=s.capacity,
        evictions=s.evictions,
        idle_closes=s.idle_closes,
        free_descriptors=s.free_descriptors,
        descriptor_limit=s.descriptor_limit,
    )
