"""``gitmem workers create|show`` and ``gitmem tasks create|show|end|delete|memory|events``."""

from __future__ import annotations

import json

import click

from gitmem.agents.tasks.values import ACCESS_VALUES, MAX_PAGE, Event, Task, Worker
from gitmem.cli.base import Context, emit_json, main, pass_context, refusals, table, workspace_option
from gitmem.clock import iso
from gitmem.engine.audit.log import actor_name
from gitmem.errors import InvalidRequest


def _worker_json(worker: Worker) -> dict[str, object]:
    return {
        "id": worker.id,
        "type": "worker",
        "name": worker.name,
        "own_memory_store_id": worker.own_store_id,
        "memory_store_ids": list(worker.attached_store_ids),
        "created_at": iso(worker.created_at),
    }


def _task_json(task: Task, token: str | None = None) -> dict[str, object]:
    out: dict[str, object] = {
        "id": task.id,
        "type": "task",
        "worker_id": task.worker_id,
        "created_at": iso(task.created_at),
        "ended_at": iso(task.ended_at) if task.ended_at else None,
        "resources": [
            {
                "type": "memory_store",
                "memory_store_id": s.store_id,
                "name": s.name,
                "description": s.description,
                "access": s.access,
                "instructions": s.instructions or None,
                "mount_path": task.mount_path(s),
                "own": s.own,
            }
            for s in task.stores
        ],
    }
    if token is not None:
        out["token"] = token
    return out


# -- workers ---------------------------------------------------------------------------------------


@main.group("workers")
def workers_group() -> None:
    """Workers: each has its own memory store, and stores its tasks read when they name none."""


@workers_group.command("create")
@click.argument("name")
@click.option("--store", "store_ids", multiple=True, metavar="STORE_ID", help="Attach a store (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole worker, not just its id.")
@workspace_option
@pass_context
@refusals
def worker_create(ctx: Context, name: str, store_ids: tuple[str, ...], as_json: bool, workspace: str | None) -> None:
    """Create a worker (and its own store) and print its id."""
    worker = ctx.parts.tasks.create_worker(ctx.workspace_id(workspace), name, list(store_ids))
    if as_json:
        emit_json(_worker_json(worker))
    else:
        click.echo(worker.id)


@workers_group.command("show")
@click.argument("worker_id")
@workspace_option
@pass_context
@refusals
def worker_show(ctx: Context, worker_id: str, workspace: str | None) -> None:
    """Show a worker: its own store and its attached stores."""
    emit_json(_worker_json(ctx.parts.tasks.get_worker(ctx.workspace_id(workspace), worker_id)))


# -- tasks -----------------------------------------------------------------------------------------


@main.group("tasks")
def tasks_group() -> None:
    """Tasks: a worker's unit of work, with a frozen list of memory stores and an event log."""


def _resources(stores: tuple[str, ...], instructions: tuple[str, ...]) -> list[dict[str, str]]:
    resources: list[dict[str, str]] = []
    for item in stores:
        store_id, _, access = item.partition(":")
        access = access.replace("-", "_") or "read_write"
        if access not in ACCESS_VALUES:
            raise InvalidRequest(f"--store {item}: access must be read_write or read_only")
        resources.append({"type": "memory_store", "memory_store_id": store_id, "access": access})
    by_id = {r["memory_store_id"]: r for r in resources}
    for item in instructions:
        store_id, sep, text = item.partition("=")
        if not sep or store_id not in by_id:
            raise InvalidRequest(f"--instructions {store_id}=TEXT must name a store given with --store")
        by_id[store_id]["instructions"] = text
    return resources


@tasks_group.command("create")
@click.option("--worker", "worker_id", required=True, metavar="WORKER_ID")
@click.option(
    "--store",
    "stores",
    multiple=True,
    metavar="STORE_ID[:read_only]",
    help="A store the task reads (repeatable, at most 8); read_write unless ':read_only'."
    " With none, the task reads the worker's attached stores.",
)
@click.option("--instructions", multiple=True, metavar="STORE_ID=TEXT", help="How to use a store given with --store.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole task with its token, not the token alone.")
@workspace_option
@pass_context
@refusals
def task_create(
    ctx: Context,
    worker_id: str,
    stores: tuple[str, ...],
    instructions: tuple[str, ...],
    as_json: bool,
    workspace: str | None,
) -> None:
    """Create a task and print its token alone on standard output (its id goes to standard error)."""
    resources = _resources(stores, instructions)
    task, token = ctx.parts.tasks.create_task(ctx.workspace_id(workspace), worker_id, resources or None)
    if as_json:
        emit_json(_task_json(task, token))
        return
    click.echo(f"created {task.id}", err=True)
    click.echo(token)


@tasks_group.command("show")
@click.argument("task_id")
@workspace_option
@pass_context
@refusals
def task_show(ctx: Context, task_id: str, workspace: str | None) -> None:
    """Show a task and its frozen stores with their folders."""
    emit_json(_task_json(ctx.parts.tasks.get_task(ctx.workspace_id(workspace), task_id)))


@tasks_group.command("end")
@click.argument("task_id")
@workspace_option
@pass_context
@refusals
def task_end(ctx: Context, task_id: str, workspace: str | None) -> None:
    """End a task: its token stops working at once (on running servers too); its writes and events stay."""
    emit_json(_task_json(ctx.parts.tasks.end_task(ctx.workspace_id(workspace), task_id)))


@tasks_group.command("delete")
@click.argument("task_id")
@workspace_option
@pass_context
@refusals
def task_delete(ctx: Context, task_id: str, workspace: str | None) -> None:
    """Delete a task, its token and its events; the versions it wrote keep its id."""
    ctx.parts.tasks.delete_task(ctx.workspace_id(workspace), task_id)
    click.echo(f"deleted {task_id}")


@tasks_group.command("memory")
@click.argument("task_id")
@click.option("--json", "as_json", is_flag=True, help="The stores' folders and the section as JSON.")
@workspace_option
@pass_context
@refusals
def task_memory(ctx: Context, task_id: str, as_json: bool, workspace: str | None) -> None:
    """Print the memory section a task gets in its context."""
    view = ctx.parts.tasks.memory_view(ctx.workspace_id(workspace), task_id)
    if not as_json:
        click.echo(view.context, nl=False)
        return
    emit_json(
        {
            "task_id": view.task_id,
            "root": view.root,
            "context": view.context,
            "stores": [
                {
                    "memory_store_id": v.store.store_id,
                    "name": v.store.name,
                    "access": v.access,
                    "mount_path": v.mount_path,
                    "available": v.available,
                    "archived": v.archived,
                    "memory_count": v.total,
                    "paths": list(v.paths),
                }
                for v in view.stores
            ],
        }
    )


@tasks_group.command("events")
@click.argument("task_id")
@click.option("--after", "after_seq", type=int, default=None, help="Only events after this sequence number.")
@click.option("--limit", type=click.IntRange(1, None), default=None, help="At most this many (default: all).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
@workspace_option
@pass_context
@refusals
def task_events(
    ctx: Context, task_id: str, after_seq: int | None, limit: int | None, as_json: bool, workspace: str | None
) -> None:
    """Print a task's events, oldest first."""
    tasks = ctx.parts.tasks
    tasks.get_task(ctx.workspace_id(workspace), task_id)
    events: list[Event] = []
    page: str | None = None
    while limit is None or len(events) < limit:
        want = MAX_PAGE if limit is None else min(MAX_PAGE, limit - len(events))
        result = tasks.list_events(task_id, after_seq=after_seq, limit=want, page=page)
        events += result.items
        if not (page := result.next_page):
            break
    if as_json:
        for e in events:
            click.echo(
                json.dumps(
                    {
                        "id": e.id,
                        "seq": e.seq,
                        "type": e.type,
                        "payload": e.payload,
                        "created_at": iso(e.created_at),
                        "created_by": e.created_by.as_dict() if e.created_by else None,
                    },
                    ensure_ascii=False,
                )
            )
        return
    table(
        [
            [
                str(e.seq),
                iso(e.created_at),
                e.type,
                actor_name(e.created_by),
                json.dumps(e.payload, ensure_ascii=False)[:80],
            ]
            for e in events
        ],
        ["SEQ", "CREATED", "TYPE", "BY", "PAYLOAD"],
    )
