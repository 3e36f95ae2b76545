"""``/v1/memory_stores``: create, list, retrieve, update (POST), archive, delete."""

from __future__ import annotations

import datetime as dt

from fastapi import APIRouter, Depends, Query

from gitmem.access import require_access, store_access, visible_stores
from gitmem.agents.review.review import ReviewSettings
from gitmem.api.deps import Caller, Engine, HomeParts, not_a_task
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


def _out(parts: HomeParts, info: StoreInfo) -> MemoryStore:
    return MemoryStore.of(info, parts.reviews.settings(info.id))


def _may_change(memory_store_id: str, principal: Caller, gm: Engine) -> None:
    """Renaming, archiving and deleting a store is for keys and users with write access (tasks are
    refused before, by ``not_a_task``); changing its review settings also takes the right to review
    (``Reviews.configure``)."""
    require_access(gm, principal, memory_store_id, write=True)


# Changing a store: a task's token is refused first, then a caller without write access to it.
MAY_CHANGE = [not_a_task("change memory stores"), Depends(_may_change)]


@router.post(
    "",
    response_model=MemoryStore,
    summary="Create a memory store",
    dependencies=[not_a_task("create memory stores")],
)
def create_memory_store(body: MemoryStoreCreate, principal: Caller, gm: Engine, parts: HomeParts) -> MemoryStore:
    reviews = parts.reviews
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
    return _out(parts, info)


@router.get("", response_model=MemoryStoreList, summary="List memory stores")
def list_memory_stores(
    principal: Caller,
    gm: Engine,
    parts: HomeParts,
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
    return MemoryStoreList(data=[_out(parts, s) for s in result.items], next_page=result.next_page)


@router.get("/{memory_store_id}", response_model=MemoryStore, summary="Retrieve a memory store")
def retrieve_memory_store(memory_store_id: str, principal: Caller, gm: Engine, parts: HomeParts) -> MemoryStore:
    store_access(gm, principal, memory_store_id)
    return _out(parts, gm.get_store(principal.workspace_id, memory_store_id))


@router.post("/{memory_store_id}", response_model=MemoryStore, summary="Update a memory store", dependencies=MAY_CHANGE)
def update_memory_store(
    memory_store_id: str, body: MemoryStoreUpdate, principal: Caller, gm: Engine, parts: HomeParts
) -> MemoryStore:
    reviews = parts.reviews
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
    return _out(parts, info)


@router.post(
    "/{memory_store_id}/archive", response_model=MemoryStore, summary="Archive a memory store", dependencies=MAY_CHANGE
)
def archive_memory_store(memory_store_id: str, principal: Caller, gm: Engine, parts: HomeParts) -> MemoryStore:
    return _out(parts, gm.archive_store(principal.workspace_id, memory_store_id))


@router.delete(
    "/{memory_store_id}", response_model=DeletedMemoryStore, summary="Delete a memory store", dependencies=MAY_CHANGE
)
def delete_memory_store(memory_store_id: str, principal: Caller, gm: Engine) -> DeletedMemoryStore:
    gm.delete_store(principal.workspace_id, memory_store_id)
    return DeletedMemoryStore(id=memory_store_id)
