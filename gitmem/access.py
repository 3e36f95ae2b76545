"""Who may read and write which store: the one place the HTTP API and Git access ask.

A store of another workspace is not found; a bank is its profile owner's alone; a task sees only its
frozen list, with the access it was given; a read-only key or user only reads; only a person with write
access (or an admin key) reviews.
"""

from __future__ import annotations

import datetime as dt

from gitmem.agents.review.review import require_reviewer
from gitmem.agents.tasks.scope import store_access as _role_or_task_access
from gitmem.agents.tasks.scope import visible_store_ids
from gitmem.agents.tasks.values import Access
from gitmem.banks.profiles import check_bank_access
from gitmem.engine.catalog.catalog import Principal
from gitmem.engine.gitmem import Gitmem
from gitmem.errors import PermissionDenied
from gitmem.model import Page, StoreInfo


def store_access(gm: Gitmem, principal: Principal, store_id: str) -> Access:
    """``read_write`` or ``read_only``; ``NotFound`` if the caller may not see the store at all."""
    return _checked(gm, principal, store_id)[1]


def require_access(gm: Gitmem, principal: Principal, store_id: str, *, write: bool) -> Access:
    return require_store(gm, principal, store_id, write=write)[1]


def require_store(gm: Gitmem, principal: Principal, store_id: str, *, write: bool) -> tuple[StoreInfo, Access]:
    """:func:`require_access`, with the store's catalog row as read for the check."""
    info, access = _checked(gm, principal, store_id)
    if write and access != "read_write":
        raise PermissionDenied(f"read-only access to memory store {store_id}")
    return info, access


def check_reviewer(gm: Gitmem, principal: Principal, store_id: str) -> None:
    """A reviewer is a user with write access to the store, or an admin key; a read-write key (what
    agents and scripts are given) and a task never review. The API and the web view both ask this;
    changing a store's review settings asks the same rule (``Reviews.configure``)."""
    require_reviewer(principal)
    require_access(gm, principal, store_id, write=True)


def _checked(gm: Gitmem, principal: Principal, store_id: str) -> tuple[StoreInfo, Access]:
    info = check_bank_access(gm, principal, store_id)  # also 404 for another workspace's store
    return info, _role_or_task_access(gm, principal, store_id)


def visible_stores(
    gm: Gitmem,
    principal: Principal,
    *,
    include_archived: bool = False,
    created_gte: dt.datetime | None = None,
    created_lte: dt.datetime | None = None,
    limit: int = 20,
    page: str | None = None,
) -> Page[StoreInfo]:
    """The stores the caller may see, newest first; a task sees only its own (at most nine) stores."""
    visible = visible_store_ids(gm, principal)
    if visible is not None:
        stores = [gm.get_store(principal.workspace_id, s) for s in sorted(visible)]
        return Page([s for s in stores if include_archived or s.archived_at is None], None)
    return gm.list_stores(
        principal.workspace_id,
        include_archived=include_archived,
        created_gte=created_gte,
        created_lte=created_lte,
        limit=limit,
        page=page or None,
    )
