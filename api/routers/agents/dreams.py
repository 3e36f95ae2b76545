"""``/v1/dreams``: create, list, retrieve, cancel, archive (the SDK's ``client.beta.dreams``).

Dreams run in a :class:`gitmem.agents.dreams.runner.DreamRunner`: a background thread of each server process,
started and stopped with the app and woken when a dream is made. Its poll interval is
``GITMEM_DREAM_POLL`` seconds (default 1); a dream's time limit is ``GITMEM_DREAM_TIMEOUT``.
``GITMEM_DREAM_RUNNER=off`` starts no runner in this process (dreams then wait for another process's).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from gitmem.agents.dreams.runner import DreamRunner
from gitmem.agents.dreams.values import MAX_PAGE
from gitmem.api.deps import Caller, HomeParts, not_a_task
from gitmem.api.schemas.agents.dreams import Dream, DreamCreate, DreamList, Status
from gitmem.api.schemas.common import ERROR_RESPONSES, as_utc


def get_runner(request: Request) -> DreamRunner | None:
    """This process's dream runner (``None`` with ``GITMEM_DREAM_RUNNER=off``): a new dream wakes it."""
    runner: DreamRunner | None = request.app.state.dream_runner
    return runner


Runner = Annotated[DreamRunner | None, Depends(get_runner)]

router = APIRouter(prefix="/v1/dreams", tags=["dreams"], responses=ERROR_RESPONSES)


@router.post(
    "",
    response_model=Dream,
    summary="Create a dream: tidy a memory store in the background",
    dependencies=[not_a_task("create dreams")],
)
def create_dream(body: DreamCreate, principal: Caller, parts: HomeParts, runner: Runner) -> Dream:
    model = body.model if isinstance(body.model, str) else body.model.model_dump()
    dream = parts.dreams.create(
        principal.workspace_id,
        [i.model_dump() for i in body.inputs],
        model,
        instructions=body.instructions,
        output_behavior=body.output_behavior.model_dump() if body.output_behavior else None,
        created_by=principal.actor,
    )
    if runner is not None:
        runner.wake()
    return Dream.of(dream)


@router.get("", response_model=DreamList, summary="List dreams, newest first", dependencies=[not_a_task("list dreams")])
def list_dreams(
    principal: Caller,
    parts: HomeParts,
    created_at_gt: dt.datetime | None = Query(None, alias="created_at[gt]"),
    created_at_lt: dt.datetime | None = Query(None, alias="created_at[lt]"),
    include_archived: bool = Query(False),
    statuses: list[Status] | None = Query(None),
    statuses_brackets: list[Status] | None = Query(None, alias="statuses[]", description="The SDK's spelling"),
    limit: int = Query(20, ge=1, le=MAX_PAGE),
    page: str | None = Query(None),
) -> DreamList:
    wanted = (statuses or []) + (statuses_brackets or [])
    result = parts.dreams.list(
        principal.workspace_id,
        include_archived=include_archived,
        statuses=wanted,
        created_gt=as_utc(created_at_gt),
        created_lt=as_utc(created_at_lt),
        limit=limit,
        page=page or None,
    )
    return DreamList(data=[Dream.of(d) for d in result.items], next_page=result.next_page)


@router.get("/{dream_id}", response_model=Dream, summary="Retrieve a dream", dependencies=[not_a_task("read dreams")])
def retrieve_dream(dream_id: str, principal: Caller, parts: HomeParts) -> Dream:
    return Dream.of(parts.dreams.get(principal.workspace_id, dream_id))


@router.post(
    "/{dream_id}/cancel",
    response_model=Dream,
    summary="Cancel a pending or running dream",
    dependencies=[not_a_task("cancel dreams")],
)
def cancel_dream(dream_id: str, principal: Caller, parts: HomeParts) -> Dream:
    return Dream.of(parts.dreams.cancel(principal.workspace_id, dream_id))


@router.post(
    "/{dream_id}/archive",
    response_model=Dream,
    summary="Archive a dream that has ended",
    dependencies=[not_a_task("archive dreams")],
)
def archive_dream(dream_id: str, principal: Caller, parts: HomeParts) -> Dream:
    return Dream.of(parts.dreams.archive(principal.workspace_id, dream_id))
