"""What a task's token may reach: its frozen list of stores, each read-write or read-only; asked by
the one access rule (:mod:`gitmem.access`) and the HTTP layer. Other principals pass unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitmem.engine.catalog.catalog import principal_task_id
from gitmem.errors import (
    NotFound,
    PermissionDenied,
)

if TYPE_CHECKING:
    from gitmem.engine.catalog.catalog import Principal
    from gitmem.engine.gitmem import Gitmem
from gitmem.agents.tasks.tasks import tasks_for
from gitmem.agents.tasks.values import Access


def check_task_access(gm: Gitmem, principal: Principal, store_id: str, *, write: bool) -> None:
    """Confine a task's token to its frozen list: a store not in it is 404 (as if it did not exist),
    a write to a store it reads ``read_only`` is 403. Other principals pass unchanged."""
    task_id = principal_task_id(principal)
    if task_id is None:
        return
    access = tasks_for(gm).task_access(task_id, store_id)
    if access is None:
        raise NotFound(f"memory store {store_id} not found")
    if write and access != "read_write":
        raise PermissionDenied(f"task {task_id} has read-only access to memory store {store_id}")


def store_access(gm: Gitmem, principal: Principal, store_id: str) -> Access:
    """What the principal may do with the store: its role for keys and users; for a task, its frozen
    access (``NotFound`` outside its list). For handlers that decide per call, like the memory tool
    (``read_only=store_access(...) == "read_only"``)."""
    check_task_access(gm, principal, store_id, write=False)
    task_id = principal_task_id(principal)
    if not principal.can_write:
        return "read_only"
    if task_id is None:
        return "read_write"
    return tasks_for(gm).task_access(task_id, store_id) or "read_only"


def visible_store_ids(gm: Gitmem, principal: Principal) -> frozenset[str] | None:
    """The stores a principal may see in a listing: a task's frozen list, or ``None`` for no limit."""
    task_id = principal_task_id(principal)
    if task_id is None:
        return None
    return frozenset(tasks_for(gm).task_store_ids(task_id))


def refuse_task(principal: Principal, action: str) -> None:
    """For what a task's token may not do at all (create stores, workers, tasks; archive, delete)."""
    if principal_task_id(principal) is not None:
        raise PermissionDenied(f"a task's token cannot {action}")
