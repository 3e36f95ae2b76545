"""The MCP tools as a table: each :class:`Tool` is a name, a description, the model of its arguments and
its handler, which runs as the caller (a :class:`~gitmem.engine.catalog.catalog.Principal`) through the
engine calls of :mod:`gitmem.api.mcp.tools`. :func:`gitmem.api.mcp.server.build_server` walks
:data:`TOOLS`; a new tool is a model, a handler and a row here.

The first six are Claude's memory tool's commands, answered string for string as ``POST .../memory_tool``
answers them; the rest are a store's history, search, diffs, restore and conflicts, answered in JSON in
the REST API's shapes (:mod:`gitmem.api.mcp.answers`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from gitmem.access import visible_stores
from gitmem.api.mcp import tools
from gitmem.api.mcp.answers import as_json, text
from gitmem.engine.catalog.catalog import Principal
from gitmem.engine.gitmem import MAX_STORES_PAGE
from gitmem.parts import Parts

StoreArg = Annotated[
    str | None,
    Field(description="The memory store's id (memstore_...); a task's token may leave it out for its own store."),
]
Handler = Callable[[Parts, Principal, Any], str | CallToolResult]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    arguments: type[BaseModel]  # the tool's input schema, field by field (their order is the schema's)
    run: Handler  # (the home's parts, the caller, the arguments) -> the answer


# -- the memory tool's commands --------------------------------------------------------------------


class ViewArgs(BaseModel):
    path: str
    view_range: list[int] | None = None
    memory_store_id: StoreArg = None


class CreateArgs(BaseModel):
    path: str
    file_text: str
    memory_store_id: StoreArg = None


class StrReplaceArgs(BaseModel):
    path: str
    old_str: str
    new_str: str = ""
    memory_store_id: StoreArg = None


class InsertArgs(BaseModel):
    path: str
    insert_line: int
    insert_text: str
    memory_store_id: StoreArg = None


class DeleteArgs(BaseModel):
    path: str
    memory_store_id: StoreArg = None


class RenameArgs(BaseModel):
    old_path: str
    new_path: str
    memory_store_id: StoreArg = None


def memory_command(command: str) -> Handler:
    """The handler of one memory-tool command: its arguments are the command's fields (a view's range
    only when given)."""

    def run(parts: Parts, principal: Principal, args: Any) -> CallToolResult:
        fields = args.model_dump(exclude={"memory_store_id"}, exclude_none=True)
        result = tools.memory_command(parts, principal, args.memory_store_id, {"command": command, **fields})
        return text(result.content, error=result.is_error)

    return run


# -- a store's history, search, diffs and conflicts ------------------------------------------------


class ListStoresArgs(BaseModel):
    include_archived: bool = False
    limit: int = 20
    page: str | None = None


class HistoryArgs(BaseModel):
    memory_id: str | None = None
    path: str | None = None
    memory_store_id: StoreArg = None
    limit: int = 20
    page: str | None = None


class SearchArgs(BaseModel):
    query: str
    path_prefix: str | None = None
    limit: int = 20
    page: str | None = None
    memory_store_id: StoreArg = None


class DiffArgs(BaseModel):
    version_id: str
    against: str | None = None
    memory_store_id: StoreArg = None


class RestoreArgs(BaseModel):
    memory_id: str
    version_id: str
    expected_sha256: str | None = None
    memory_store_id: StoreArg = None


class ConflictsArgs(BaseModel):
    memory_id: str | None = None
    conflict_id: str | None = None
    state: Literal["open", "resolved"] | None = None
    limit: int = 20
    page: str | None = None
    memory_store_id: StoreArg = None


class ResolveConflictArgs(BaseModel):
    conflict_id: str
    take: Literal["winner", "loser", "merged"]
    content: str | None = None
    expected_sha256: str | None = None
    memory_store_id: StoreArg = None


def list_stores(parts: Parts, p: Principal, a: ListStoresArgs) -> str:
    limit = min(a.limit, MAX_STORES_PAGE)
    return as_json(visible_stores(parts.gm, p, include_archived=a.include_archived, limit=limit, page=a.page))


def history(parts: Parts, p: Principal, a: HistoryArgs) -> str:
    found = tools.history(parts, p, a.memory_store_id, memory_id=a.memory_id, path=a.path, limit=a.limit, page=a.page)
    return as_json(found)


def search(parts: Parts, p: Principal, a: SearchArgs) -> str:
    found = tools.search(parts, p, a.memory_store_id, a.query, path_prefix=a.path_prefix, limit=a.limit, page=a.page)
    return as_json(found)


def diff(parts: Parts, p: Principal, a: DiffArgs) -> str:
    return as_json(tools.diff(parts, p, a.memory_store_id, a.version_id, a.against))


def restore(parts: Parts, p: Principal, a: RestoreArgs) -> str:
    return as_json(tools.restore(parts, p, a.memory_store_id, a.memory_id, a.version_id, a.expected_sha256))


def conflicts(parts: Parts, p: Principal, a: ConflictsArgs) -> str:
    found = tools.conflicts(
        parts, p, a.memory_store_id, memory_id=a.memory_id, conflict_id=a.conflict_id, state=a.state,
        limit=a.limit, page=a.page,
    )  # fmt: skip
    return as_json(found)


def resolve_conflict(parts: Parts, p: Principal, a: ResolveConflictArgs) -> str:
    resolved = tools.resolve_conflict(
        parts, p, a.memory_store_id, a.conflict_id, a.take, content=a.content, expected_sha256=a.expected_sha256
    )
    return as_json(resolved)


TOOLS: tuple[Tool, ...] = (
    Tool(
        "view",
        "View a folder listing or a file's numbered lines (optionally view_range [start, end]).",
        ViewArgs,
        memory_command("view"),
    ),
    Tool(
        "create",
        "Create a new file with file_text (a path already taken is refused).",
        CreateArgs,
        memory_command("create"),
    ),
    Tool(
        "str_replace",
        "Replace the one occurrence of old_str in a file with new_str.",
        StrReplaceArgs,
        memory_command("str_replace"),
    ),
    Tool(
        "insert",
        "Insert insert_text after line insert_line (0 inserts at the top).",
        InsertArgs,
        memory_command("insert"),
    ),
    Tool("delete", "Delete a file or a folder.", DeleteArgs, memory_command("delete")),
    Tool("rename", "Rename or move a file or folder.", RenameArgs, memory_command("rename")),
    Tool(
        "list_stores",
        "The memory stores you may use (id, name, description), newest first.",
        ListStoresArgs,
        list_stores,
    ),
    Tool(
        "history",
        "A note's versions, newest first, by memory_id or by its path (/memories/...).",
        HistoryArgs,
        history,
    ),
    Tool(
        "search",
        'Full-text search of a store\'s notes: words ANDed, "a phrase", prefix*, OR.',
        SearchArgs,
        search,
    ),
    Tool(
        "diff",
        "A unified diff of a version against another (default: the note's previous one).",
        DiffArgs,
        diff,
    ),
    Tool(
        "restore",
        "Bring back an old version of a note as a new version (a deleted note too).",
        RestoreArgs,
        restore,
    ),
    Tool(
        "conflicts",
        "Edits refused because the note changed meanwhile, kept as conflicts, newest first (of one note with "
        "memory_id; open or resolved with state); with conflict_id, that one with its text, a diff against the "
        "version it lost to and a three-way merge.",
        ConflictsArgs,
        conflicts,
    ),
    Tool(
        "resolve_conflict",
        "Resolve a conflict: take the winner (nothing written), the loser (its text written) or merged (content, "
        "or the clean merge), as a new version if the note still holds the winner's text (or expected_sha256).",
        ResolveConflictArgs,
        resolve_conflict,
    ),
)
