"""Who may read and write which store: the one place the HTTP API and Git access ask.

A store of another workspace is not found; a bank is its profile owner's alone; a task sees only its
frozen list, with the access it was given; a read-only key or user only reads.
"""

from __future__ import annotations

from gitmem.catalog import Principal
from gitmem.errors import PermissionDenied
from gitmem.home import Gitmem
from gitmem.profiles import check_bank_access
from gitmem.tasks import Access
from gitmem.tasks import store_access as _role_or_task_access


def store_access(gm: Gitmem, principal: Principal, store_id: str) -> Access:
    """``read_write`` or ``read_only``; ``NotFound`` if the caller may not see the store at all."""
    check_bank_access(gm, principal, store_id)  # also 404 for another workspace's store
    return _role_or_task_access(gm, principal, store_id)


def require_access(gm: Gitmem, principal: Principal, store_id: str, *, write: bool) -> Access:
    access = store_access(gm, principal, store_id)
    if write and access != "read_write":
        raise PermissionDenied(f"read-only access to memory store {store_id}")
    return access
