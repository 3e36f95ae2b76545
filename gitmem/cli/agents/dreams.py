"""``gitmem dreams create|list|show|cancel|archive``: dreams tidy a memory store (docs/architecture.md)."""

from __future__ import annotations

import click

from gitmem.agents.dreams.dreams import runner_id
from gitmem.agents.dreams.values import MAX_PAGE, STATUSES, Dream
from gitmem.cli.base import Context, emit_json, main, pass_context, refusals, table, workspace_option
from gitmem.clock import iso
from gitmem.config.home import dreamer


def dream_json(dream: Dream) -> dict[str, object]:
    """The same shape as the API's: the SDK's ``BetaDream`` (the tasks it reads are ``sessions``)."""
    inputs: list[dict[str, object]] = [{"type": "memory_store", "memory_store_id": dream.input_store_id}]
    if dream.task_ids:
        inputs.append({"type": "sessions", "session_ids": list(dream.task_ids)})
    behavior: dict[str, object] = {"type": dream.output_behavior}
    if dream.output_behavior == "update_existing":
        behavior["memory_store_id"] = dream.input_store_id
    return {
        "id": dream.id,
        "type": "dream",
        "status": dream.status,
        "inputs": inputs,
        "model": {"id": dream.model_id, "speed": "standard"},
        "instructions": dream.instructions,
        "output_behavior": behavior,
        "outputs": [{"type": "memory_store", "memory_store_id": dream.output_store_id}]
        if dream.output_store_id
        else [],
        "usage": dream.usage.as_dict(),
        "error": {"type": dream.error_type, "message": dream.error_message or ""}
        if dream.status == "failed" and dream.error_type
        else None,
        "session_id": dream.task_id,
        "created_at": iso(dream.created_at),
        "ended_at": iso(dream.ended_at) if dream.ended_at else None,
        "archived_at": iso(dream.archived_at) if dream.archived_at else None,
    }


@main.group("dreams")
def dreams_group() -> None:
    """Dreams: background jobs that read a store (and tasks) and write a tidier store."""


@dreams_group.command("create")
@click.argument("store_id")
@click.option("--model", default="claude-opus-4-7", show_default=True, help="The model id the dream uses.")
@click.option("--task", "task_ids", multiple=True, metavar="TASK_ID", help="A task to learn from (repeatable).")
@click.option("--instructions", default=None, help="Guidance for the dream (at most 4,096 characters).")
@click.option("--update-existing", is_flag=True, help="Write the result into the input store, not a new one.")
@click.option(
    "--run",
    "run_now",
    is_flag=True,
    help="Run the dream now in this process (with GITMEM_DREAMER's dreamer) instead of leaving it"
    " to a server's runner.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole dream, not just its id.")
@workspace_option
@pass_context
@refusals
def dream_create(
    ctx: Context,
    store_id: str,
    model: str,
    task_ids: tuple[str, ...],
    instructions: str | None,
    update_existing: bool,
    run_now: bool,
    as_json: bool,
    workspace: str | None,
) -> None:
    """Create a dream that tidies STORE_ID and print its id."""
    inputs: list[dict[str, object]] = [{"type": "memory_store", "memory_store_id": store_id}]
    if task_ids:
        inputs.append({"type": "tasks", "task_ids": list(task_ids)})
    behavior = {"type": "update_existing", "memory_store_id": store_id} if update_existing else None
    dreams = ctx.parts.dreams
    dream = dreams.create(
        ctx.workspace_id(workspace), inputs, model, instructions=instructions, output_behavior=behavior
    )
    if run_now and dreams.claim(dream.id, runner_id()):
        dream = dreams.run(dream.id, dreamer(ctx.config.dreams), timeout_seconds=ctx.config.dreams.timeout)
    if as_json:
        emit_json(dream_json(dream))
    else:
        click.echo(dream.id)
        if dream.status == "failed":
            click.echo(f"failed: {dream.error_type}: {dream.error_message}", err=True)


@dreams_group.command("list")
@click.option("--all", "include_archived", is_flag=True, help="Include archived dreams.")
@click.option("--status", "statuses", multiple=True, type=click.Choice(STATUSES), help="Only these statuses.")
@click.option("--limit", type=click.IntRange(1, MAX_PAGE), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="The dreams as JSON.")
@workspace_option
@pass_context
@refusals
def dream_list(
    ctx: Context, include_archived: bool, statuses: tuple[str, ...], limit: int, as_json: bool, workspace: str | None
) -> None:
    """List dreams, newest first."""
    page = ctx.parts.dreams.list(
        ctx.workspace_id(workspace), include_archived=include_archived, statuses=list(statuses) or None, limit=limit
    )
    if as_json:
        emit_json({"data": [dream_json(d) for d in page.items], "next_page": page.next_page})
        return
    table(
        [[d.id, d.status, d.input_store_id, d.output_store_id or "-", iso(d.created_at)] for d in page.items],
        ["ID", "STATUS", "INPUT", "OUTPUT", "CREATED"],
    )


@dreams_group.command("show")
@click.argument("dream_id")
@workspace_option
@pass_context
@refusals
def dream_show(ctx: Context, dream_id: str, workspace: str | None) -> None:
    """Show a dream."""
    emit_json(dream_json(ctx.parts.dreams.get(ctx.workspace_id(workspace), dream_id)))


@dreams_group.command("cancel")
@click.argument("dream_id")
@workspace_option
@pass_context
@refusals
def dream_cancel(ctx: Context, dream_id: str, workspace: str | None) -> None:
    """Cancel a pending or running dream."""
    emit_json(dream_json(ctx.parts.dreams.cancel(ctx.workspace_id(workspace), dream_id)))


@dreams_group.command("archive")
@click.argument("dream_id")
@workspace_option
@pass_context
@refusals
def dream_archive(ctx: Context, dream_id: str, workspace: str | None) -> None:
    """Archive a dream that has ended."""
    emit_json(dream_json(ctx.parts.dreams.archive(ctx.workspace_id(workspace), dream_id)))
