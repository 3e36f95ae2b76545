"""``/v1/memory_stores/{id}/memories``: create, list, retrieve, update (POST), delete.

Memory responses carry ``ETag: "<blob id>"``; update and delete take ``If-Match`` with that tag as a
precondition on the note's current blob, beside the SDK's ``content_sha256`` preconditions. A write refused
for a stale precondition is kept as a conflict (its 409 names ``conflict_id``; docs/conflicts.md); an update
may ask for a three-way merge instead (``Gitmem-Merge: three-way``, a gitmem extension).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from typing import Any, Literal

from fastapi import APIRouter, Header, Query, Response

from gitmem.api.deps import OpenStore
from gitmem.api.responses import json_response
from gitmem.api.schemas.common import ERROR_RESPONSES, Sha256Hex, View
from gitmem.api.schemas.stores.memories import (
    DeletedMemory,
    Memory,
    MemoryCreate,
    MemoryList,
    MemoryUpdate,
    memory_item,
)
from gitmem.api.schemas.stores.search import MemoryRestore
from gitmem.engine.store.restore import restore
from gitmem.engine.store.store import MAX_NOTES_PAGE as MAX_PAGE
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import InvalidRequest
from gitmem.model import Note
from gitmem.rules.paging import MAX_FULL_PAGE

log = logging.getLogger("gitmem.api")
_BLOB_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

router = APIRouter(prefix="/v1/memory_stores/{memory_store_id}/memories", tags=["memories"], responses=ERROR_RESPONSES)

# Memory responses carry the note's blob id as a strong entity tag.
WITH_ETAG: dict[int | str, dict[str, Any]] = {
    200: {"headers": {"ETag": {"description": 'The note\'s blob id, "<blob id>"', "schema": {"type": "string"}}}}
}

IfMatch = Header(
    None,
    alias="If-Match",
    description='Apply only if the note\'s current blob is this one: the ETag of a prior read, "<blob id>"',
)


@router.post("", response_model=Memory, summary="Create a memory", responses=WITH_ETAG)
def create_memory(body: MemoryCreate, ref: OpenStore, view: View = Query("basic")) -> Response:
    content = body.content or ""
    note = ref.open().create(body.path, content, actor=ref.principal.actor)
    if note.content is None:
        note = dataclasses.replace(note, content=content)
    return _answer(note, view)


@router.get("", response_model=MemoryList, summary="List memories")
def list_memories(
    ref: OpenStore,
    path_prefix: str | None = Query(None, description="Only paths below this prefix; it ends with '/'"),
    depth: int = Query(0, ge=0, le=1, description="1: direct children, deeper ones as memory_prefix"),
    view: View = Query("basic"),
    limit: int = Query(20, ge=1, le=MAX_PAGE, description=f"With view=full, at most {MAX_FULL_PAGE}"),
    page: str | None = Query(None),
) -> Response:
    if view == "full":
        limit = min(limit, MAX_FULL_PAGE)
    result = ref.open().list(
        path_prefix=path_prefix or None, depth=depth, limit=limit, page=page or None, with_content=view == "full"
    )
    return json_response(MemoryList(data=[memory_item(i, view) for i in result.items], next_page=result.next_page))


@router.get("/{memory_id}", response_model=Memory, summary="Retrieve a memory", responses=WITH_ETAG)
async def retrieve_memory(memory_id: str, ref: OpenStore, view: View = Query("full")) -> Response:
    def answer(store: MemoryStore, caught_up: bool) -> Response:
        full = view == "full"
        note = store.get(memory_id, with_content=full, catch_up=False) if caught_up else store.get(memory_id, full)
        return _answer(note, view)

    return await ref.read(answer)


MERGE_HEADER = "Gitmem-Merge"
MERGED_HEADER = "Gitmem-Merged"
THREE_WAY = "three-way"


@router.post(
    "/{memory_id}", response_model=Memory, summary="Update a memory (content, path or both)", responses=WITH_ETAG
)
def update_memory(
    memory_id: str,
    body: MemoryUpdate,
    ref: OpenStore,
    view: View = Query("basic"),
    if_match: str | None = IfMatch,
    merge: Literal["three-way"] | None = Query(
        None, description="gitmem extension: merge a stale update three ways with the winner instead of a 409"
    ),
    merge_header: Literal["three-way"] | None = Header(
        None, alias=MERGE_HEADER, description="gitmem extension: as ?merge=three-way"
    ),
) -> Response:
    store = ref.open()
    merging = THREE_WAY in (merge, merge_header)
    note = store.update(
        memory_id,
        content=body.content,
        path=body.path,
        expected_sha256=body.precondition.content_sha256 if body.precondition else None,
        expected_blob_id=_blob_precondition(if_match),
        actor=ref.principal.actor,
        merge=merging,
    )
    merged = merging and body.content is not None and note.content_sha256 != _sha256(body.content)
    if view == "full" and note.content is None:
        note = _with_content(store, note, None if merged else body.content)
    return _answer(note, view, {MERGED_HEADER: THREE_WAY} if merged else None)


@router.delete("/{memory_id}", response_model=DeletedMemory, summary="Delete a memory")
def delete_memory(
    memory_id: str,
    ref: OpenStore,
    expected_content_sha256: Sha256Hex | None = Query(None),
    if_match: str | None = IfMatch,
) -> Response:
    ref.open().delete(
        memory_id,
        expected_sha256=expected_content_sha256,
        expected_blob_id=_blob_precondition(if_match),
        actor=ref.principal.actor,
    )
    return json_response(DeletedMemory(id=memory_id))


@router.post(
    "/{memory_id}/restore",
    response_model=Memory,
    summary="Bring back a version's content and path",
    responses=WITH_ETAG,
)
def restore_memory(
    memory_id: str,
    body: MemoryRestore,
    ref: OpenStore,
    view: View = Query("basic"),
    if_match: str | None = IfMatch,
) -> Response:
    store = ref.open()
    note = restore(
        store,
        memory_id,
        body.version_id,
        expected_sha256=body.precondition.content_sha256 if body.precondition else None,
        expected_blob_id=_blob_precondition(if_match),
        actor=ref.principal.actor,
    )
    if view == "full" and note.content is None:
        note = _with_content(store, note, None)
    return _answer(note, view)


def _with_content(store: MemoryStore, note: Note, sent: str | None) -> Note:
    """The written note with its text, for ``view=full``. The write is on ``main`` already, so a failing
    re-read (a path-only move, then a concurrent delete) must not turn its answer into an error: the
    answer then leaves the content out."""
    if sent is not None:
        return dataclasses.replace(note, content=sent)
    try:
        return store.get(note.id, with_content=True)
    except Exception:
        log.warning("memory %s was written but could not be read back", note.id, exc_info=True)
        return note


def _answer(note: Note, view: View, headers: dict[str, str] | None = None) -> Response:
    return json_response(Memory.of(note, view), headers={"ETag": f'"{note.blob_id}"', **(headers or {})})


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _blob_precondition(if_match: str | None) -> str | None:
    """The blob id in ``If-Match: "<blob id>"``; ``*`` asks only that the note exists."""
    if if_match is None:
        return None
    value = if_match.strip()
    if value == "*":
        return None
    if value.startswith("W/"):
        raise InvalidRequest("If-Match needs a strong entity tag: the ETag of a memory response")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    if not _BLOB_ID.fullmatch(value):
        raise InvalidRequest('If-Match takes one entity tag, "<blob id>", as sent in a memory\'s ETag')
    return value
