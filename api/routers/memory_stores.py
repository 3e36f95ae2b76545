"""``/v1/memory_stores``: create, list, retrieve, update (POST), archive, delete."""

from __future__ import annotations

import datetime as dt

from fastapi import APIRouter, Query

from api.deps import Caller, Engine
from api.schemas import (
    ERROR_RESPONSES,
    DeletedMemoryStore,
    MemoryStore,
    MemoryStoreCreate,
    MemoryStoreList,
    MemoryStoreUpdate,
    as_utc,
)

MAX_PAGE = 100

router = APIRouter(prefix="/v1/memory_stores", tags=["memory_stores"], responses=ERROR_RESPONSES)


@router.post("", response_model=MemoryStore, summary="Create a memory store")
def create_memory_store(body: MemoryStoreCreate, principal: Caller, gm: Engine) -> MemoryStore:
    info = gm.create_store(
        principal.workspace_id, body.name, description=body.description or "", metadata=body.metadata
    )
    return MemoryStore.of(info)


@router.get("", response_model=MemoryStoreList, summary="List memory stores")
def list_memory_stores(
    principal: Caller,
    gm: Engine,
    include_archived: bool = Query(False),
    created_at_gte: dt.datetime | None = Query(None, alias="created_at[gte]"),
    created_at_lte: dt.datetime | None = Query(None, alias="created_at[lte]"),
    limit: int = Query(20, ge=1, le=MAX_PAGE),
    page: str | None = Query(None),
) -> MemoryStoreList:
    result = gm.list_stores(
        principal.workspace_id,
        include_archived=include_archived,
        created_gte=as_utc(created_at_gte),
        created_lte=as_utc(created_at_lte),
        limit=limit,
        page=page or None,
    )
    return MemoryStoreList(data=[MemoryStore.of(s) for s in result.items], next_page=result.next_page)


@router.get("/{memory_store_id}", response_model=MemoryStore, summary="Retrieve a memory store")
def retrieve_memory_store(memory_store_id: str, principal: Caller, gm: Engine) -> MemoryStore:
    return MemoryStore.of(gm.get_store(principal.workspace_id, memory_store_id))


@router.post("/{memory_store_id}", response_model=MemoryStore, summary="Update a memory store")
def update_memory_store(
    memory_store_id: str, body: MemoryStoreUpdate, principal: Caller, gm: Engine
) -> MemoryStore:
    info = gm.update_store(
        principal.workspace_id,
        memory_store_id,
        name=body.name,
        description=body.description,
        metadata_patch=body.metadata,
    )
    return MemoryStore.of(info)


@router.post("/{memory_store_id}/archive", response_model=MemoryStore, summary="Archive a memory store")
def archive_memory_store(memory_store_id: str, principal: Caller, gm: Engine) -> MemoryStore:
    return MemoryStore.of(gm.archive_store(principal.workspace_id, memory_store_id))


@router.delete("/{memory_store_id}", response_model=DeletedMemoryStore, summary="Delete a memory store")
def delete_memory_store(memory_store_id: str, principal: Caller, gm: Engine) -> DeletedMemoryStore:
    gm.delete_store(principal.workspace_id, memory_store_id)
    return DeletedMemoryStore(id=memory_store_id)
