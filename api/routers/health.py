"""Liveness: answers without auth once the app is up."""

from __future__ import annotations

from fastapi import APIRouter

from gitmem.api.schemas.common import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, summary="Liveness check")
def healthz() -> Health:
    return Health()
