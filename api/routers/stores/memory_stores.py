"""``/v1/memory_stores``: create, list, retrieve, update (POST), archive, delete."""

from __future__ import annotations

import datetime as dt

from fastapi import APIRouter, Query

from gitmem.access import require_access, store_access, visible_stores
from gitmem.agents.review.review import Reviews, ReviewSettings
from gitmem.agents.tasks.scope import refuse_task
from gitmem.api.deps import Caller, Engine
from gitmem.api.schemas.common import ERROR_RESPONSES, as_utc
from gitmem.api.schemas.stores.memory_stores import (
    DeletedMemoryStore,
    MemoryStore,
    MemoryStoreCreate,
    MemoryStoreList,
    MemoryStoreUpdate,
)
from gitmem.engine.gitmem import MAX_STORES_PAGE
from gitmem.model import StoreInfo

router = APIRouter(prefix="/v1/memory_stores", tags=["memory_stores"], responses=ERROR_RESPONSES)


def _out(gm: Engine, info: StoreInfo) -> MemoryStore:
    return MemoryStore.of(info, Reviews.of(gm).settings(info.id))


def _may_change(gm: Engine, principal: Caller, memory_store_id: str) -> None:
    """Renaming, archiving and deleting a store is for keys and users with write access, not tasks;
    changing its review settings also takes the right to review (``Reviews.configure``)."""
    refuse_task(principal, "change memory stores")
    require_access(gm, principal, memory_store_id, write=True)


@router.post("", response_model=MemoryStore, summary="Create a memory store")
def create_memory_store(body: MemoryStoreCreate, principal: Caller, gm: Engine) -> MemoryStore:
    refuse_task(principal, "create memory stores")
    reviews = Reviews.of(gm)
    # Asked before the store exists, so a refusal (a key that may not review) creates nothing.
    reviews.planned(ReviewSettings(""), enabled=body.review, read_approved_only=body.read_approved_only, by=principal)
    info = gm.create_store(
        principal.workspace_id,
        body.name,
        description=body.description or "",
        metadata=body.metadata,
        encrypted=bool(body.encrypted),
    )
    if body.review or body.read_approved_only:
        reviews.configure(
            principal.workspace_id,
            info.id,
            enabled=body.review,
            read_approved_only=body.read_approved_only,
            by=principal,
        )
    return _out(gm, info)


@router.get("", response_model=MemoryStoreList, summary="List memory stores")
def list_memory_stores(
    principal: Caller,
    gm: Engine,
    include_archived: bool = Query(False),
    created_at_gte: dt.datetime | None = Query(None, alias="created_at[gte]"),
    created_at_lte: dt.datetime | None = Query(None, alias="created_at[lte]"),
    limit: int = Query(20, ge=1, le=MAX_STORES_PAGE),
    page: str | None = Query(None),
) -> MemoryStoreList:
    result = visible_stores(
        gm,
        principal,
        include_archived=include_archived,
        created_gte=as_utc(created_at_gte),
        created_lte=as_utc(created_at_lte),
        limit=limit,
        page=page,
    )
    return MemoryStoreList(data=[_out(gm, s) for s in result.items], next_page=result.next_page)


@router.get("/{memory_store_id}", response_model=MemoryStore, summary="Retrieve a memory store")
def retrieve_memory_store(memory_store_id: str, principal: Caller, gm: Engine) -> MemoryStore:
    store_access(gm, principal, memory_store_id)
    return _out(gm, gm.get_store(principal.workspace_id, memory_store_id))


@router.post("/{memory_store_id}", response_model=MemoryStore, summary="Update a memory store")
def update_memory_store(memory_store_id: str, body: MemoryStoreUpdate, principal: Caller, gm: Engine) -> MemoryStore:
    _may_change(gm, principal, memory_store_id)
    reviews = Reviews.of(gm)
    if body.review is not None or body.read_approved_only is not None:  # refused before anything changes
        reviews.planned(
            reviews.settings(memory_store_id),
            enabled=body.review,
            read_approved_only=body.read_approved_only,
            by=principal,
        )
    info = gm.update_store(
        principal.workspace_id,
        memory_store_id,
        name=body.name,
        description=body.description,
        metadata_patch=body.metadata,
    )
    if body.review is not None or body.read_approved_only is not None:
        reviews.configure(
            principal.workspace_id,
            info.id,
            enabled=body.review,
            read_approved_only=body.read_approved_only,
            by=principal,
        )
    return _out(gm, info)


@router.post("/{memory_store_id}/archive", response_model=MemoryStore, summary="Archive a memory store")
def archive_memory_store(memory_store_id: str, principal: Caller, gm: Engine) -> MemoryStore:
    _may_change(gm, principal, memory_store_id)
    return _out(gm, gm.archive_store(principal.workspace_id, memory_store_id))


@router.delete("/{memory_store_id}", response_model=DeletedMemoryStore, summary="Delete a memory store")
def delete_memory_store(memory_store_id: str, principal: Caller, gm: Engine) -> DeletedMemoryStore:
    _may_change(gm, principal, memory_store_id)
    gm.delete_store(principal.workspace_id, memory_store_id)
    return DeletedMemoryStore(id=memory_store_id)
