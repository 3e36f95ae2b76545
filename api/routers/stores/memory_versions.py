"""``/v1/memory_stores/{id}/memory_versions``: list (newest first), retrieve, redact."""

from __future__ import annotations

import datetime as dt

from fastapi import APIRouter, Query

from gitmem.api.deps import Caller, Engine, Store
from gitmem.api.schemas.common import ERROR_RESPONSES, Operation, View, as_utc
from gitmem.api.schemas.stores.memory_versions import MemoryVersion, MemoryVersionList
from gitmem.api.schemas.stores.search import MemoryVersionDiff
from gitmem.engine.rewrite.redaction import redact
from gitmem.engine.store.diff import diff_versions
from gitmem.engine.store.store import MAX_VERSIONS_PAGE as MAX_PAGE
from gitmem.errors import InvalidRequest
from gitmem.rules.paging import MAX_FULL_PAGE

router = APIRouter(
    prefix="/v1/memory_stores/{memory_store_id}/memory_versions",
    tags=["memory_versions"],
    responses=ERROR_RESPONSES,
)


@router.get("", response_model=MemoryVersionList, summary="List memory versions, newest first")
def list_memory_versions(
    store: Store,
    memory_id: str | None = Query(None),
    operation: Operation | None = Query(None),
    session_id: str | None = Query(None, description="The SDK's name for task_id"),
    task_id: str | None = Query(None),
    api_key_id: str | None = Query(None),
    user_id: str | None = Query(None),
    service_account_id: str | None = Query(None, description="gitmem has no service accounts: matches none"),
    created_at_gte: dt.datetime | None = Query(None, alias="created_at[gte]"),
    created_at_lte: dt.datetime | None = Query(None, alias="created_at[lte]"),
    view: View = Query("basic"),
    limit: int = Query(20, ge=1, le=MAX_PAGE, description=f"With view=full, at most {MAX_FULL_PAGE}"),
    page: str | None = Query(None),
) -> MemoryVersionList:
    if session_id and task_id and session_id != task_id:
        raise InvalidRequest("session_id and task_id name the same filter; they differ")
    if service_account_id:
        return MemoryVersionList(data=[], next_page=None)
    if view == "full":
        limit = min(limit, MAX_FULL_PAGE)
    result = store.versions(
        memory_id=memory_id or None,
        operation=operation,
        task_id=task_id or session_id or None,
        api_key_id=api_key_id or None,
        user_id=user_id or None,
        created_gte=as_utc(created_at_gte),
        created_lte=as_utc(created_at_lte),
        limit=limit,
        page=page or None,
        with_content=view == "full",
    )
    return MemoryVersionList(data=[MemoryVersion.of(v, view) for v in result.items], next_page=result.next_page)


@router.get("/{memory_version_id}", response_model=MemoryVersion, summary="Retrieve a memory version")
def retrieve_memory_version(memory_version_id: str, store: Store, view: View = Query("full")) -> MemoryVersion:
    return MemoryVersion.of(store.version(memory_version_id, with_content=view == "full"), view)


@router.get("/{memory_version_id}/diff", response_model=MemoryVersionDiff, summary="What a version changed")
def diff_memory_version(
    memory_version_id: str,
    store: Store,
    against: str | None = Query(None, description="Another version of the store (default: the one before)"),
) -> MemoryVersionDiff:
    return MemoryVersionDiff.of(diff_versions(store, memory_version_id, against or None))


@router.post("/{memory_version_id}/redact", response_model=MemoryVersion, summary="Redact a memory version")
def redact_memory_version(memory_version_id: str, store: Store, principal: Caller, gm: Engine) -> MemoryVersion:
    return MemoryVersion.of(redact(store, memory_version_id, principal.actor, gm.catalog.erasures), "basic")
