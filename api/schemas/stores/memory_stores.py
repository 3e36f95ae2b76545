"""The memory-store resource on the wire (``/v1/memory_stores``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from gitmem.agents.review.review import ReviewSettings
from gitmem.api.schemas.common import (
    InModel,
    OutModel,
    StoreDescription,
    StoreName,
    Timestamp,
    documented,
)
from gitmem.model import StoreInfo


class StoreReview(OutModel):
    """The store is under a steward's review."""

    enabled: bool
    read_approved_only: bool


def _absent(value: object) -> bool:
    return value is None


class GitmemStoreFields(OutModel):
    """gitmem's own fields of a memory store, none of them the hosted API's: kept under the one key
    ``gitmem`` so that a field the hosted API adds later cannot collide with them, and left out
    entirely when none applies (a store object is then exactly the SDK's ``BetaManagedAgentsMemoryStore``)."""

    review: StoreReview | None = Field(None, exclude_if=_absent, description="Present while the store is under review")


class MemoryStore(OutModel):
    id: str
    type: Literal["memory_store"] = "memory_store"
    name: str
    description: str
    metadata: dict[str, str]
    created_at: Timestamp
    updated_at: Timestamp
    archived_at: Timestamp | None = None
    gitmem: GitmemStoreFields | None = Field(
        None, exclude_if=_absent, description="gitmem's own fields (docs/http-api.md); absent when none applies"
    )

    @classmethod
    def of(cls, info: StoreInfo, review: ReviewSettings | None = None) -> MemoryStore:
        return cls(
            id=info.id,
            name=info.name,
            description=info.description or "",
            metadata=dict(info.metadata or {}),
            created_at=info.created_at,
            updated_at=info.updated_at,
            archived_at=info.archived_at,
            gitmem=GitmemStoreFields(review=StoreReview(enabled=True, read_approved_only=review.read_approved_only))
            if review is not None and review.enabled
            else None,
        )


class DeletedMemoryStore(OutModel):
    id: str
    type: Literal["memory_store_deleted"] = "memory_store_deleted"


class MemoryStoreList(OutModel):
    data: list[MemoryStore]
    next_page: str | None = None


class MemoryStoreCreate(InModel):
    name: StoreName
    description: StoreDescription | None = None
    metadata: Annotated[dict[str, str], documented(maxProperties=16)] | None = None
    # gitmem's extension: encrypt note content at rest with the store's own AES-SIV key.
    encrypted: bool | None = None
    # gitmem's extensions: put the store under a steward's review; tasks read only what was approved.
    review: bool | None = None
    read_approved_only: bool | None = None


class MemoryStoreUpdate(InModel):
    name: StoreName | None = None
    description: StoreDescription | None = None
    # A key set to null is removed; keys left out keep their values.
    metadata: dict[str, str | None] | None = None
    review: bool | None = None
    read_approved_only: bool | None = None


# -- memories --------------------------------------------------------------------------------------
