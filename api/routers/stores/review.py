"""``/v1/memory_stores/{id}/review``: what changed since the last review, approve, revert."""

from __future__ import annotations

from fastapi import APIRouter, Query

from gitmem.agents.review.review import MAX_PENDING_PAGE, current_mark
from gitmem.api.deps import HomeParts, Reviewer
from gitmem.api.schemas.common import ERROR_RESPONSES
from gitmem.api.schemas.stores.memory_versions import MemoryVersion
from gitmem.api.schemas.stores.review import PendingVersion, ReviewApprove, ReviewMarkOut, ReviewPage, ReviewRevert

router = APIRouter(prefix="/v1/memory_stores/{memory_store_id}/review", tags=["review"], responses=ERROR_RESPONSES)


@router.get("", response_model=ReviewPage, summary="The versions written since the last review, with diffs")
def pending_review(
    reviewer: Reviewer,
    parts: HomeParts,
    limit: int = Query(20, ge=1, le=MAX_PENDING_PAGE),
    page: str | None = Query(None),
) -> ReviewPage:
    store, _ = reviewer
    reviews = parts.reviews
    result = reviews.pending(store, limit=limit, page=page or None)
    mark = current_mark(store)
    return ReviewPage(
        memory_store_id=store.id,
        read_approved_only=reviews.settings(store.id).read_approved_only,
        mark=ReviewMarkOut.of(mark) if mark else None,
        pending_count=reviews.pending_count(store),
        data=[PendingVersion.of(c) for c in result.items],
        next_page=result.next_page,
    )


@router.post("/approve", response_model=ReviewMarkOut, summary="Approve every version through one")
def approve(body: ReviewApprove, reviewer: Reviewer, parts: HomeParts) -> ReviewMarkOut:
    store, principal = reviewer
    return ReviewMarkOut.of(parts.reviews.approve(store, body.through_version_id, principal.actor))


@router.post("/revert", response_model=MemoryVersion, summary="Undo one version's change with a new version")
def revert(body: ReviewRevert, reviewer: Reviewer, parts: HomeParts) -> MemoryVersion:
    store, principal = reviewer
    return MemoryVersion.of(parts.reviews.revert(store, body.version_id, principal.actor), "basic")
