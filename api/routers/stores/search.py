"""``GET /v1/memory_stores/{id}/search``: the store's current notes that match a query, best first."""

from __future__ import annotations

from fastapi import APIRouter, Query

from gitmem.api.deps import Store
from gitmem.api.schemas.common import ERROR_RESPONSES
from gitmem.api.schemas.stores.search import SearchResult, SearchResults
from gitmem.engine.index.search import MAX_SEARCH_PAGE

router = APIRouter(prefix="/v1/memory_stores/{memory_store_id}", tags=["search"], responses=ERROR_RESPONSES)


@router.get("/search", response_model=SearchResults, summary="Search a store's memories")
def search_memories(
    store: Store,
    q: str = Query(description='Words (ANDed), "a phrase", prefix*, OR; any other punctuation is text'),
    path_prefix: str | None = Query(None, description="Only paths below this prefix; it ends with '/'"),
    limit: int = Query(20, ge=1, le=MAX_SEARCH_PAGE),
    page: str | None = Query(None),
) -> SearchResults:
    result = store.search(q, path_prefix=path_prefix or None, limit=limit, page=page or None)
    return SearchResults(data=[SearchResult.of(hit) for hit in result.items], next_page=result.next_page)
