"""The MCP server's tools and its session manager (the official ``mcp`` package), imported by
:mod:`gitmem.api.mcp` on the first request to ``/mcp``.

Stateless mode: every POST is answered on its own, so any server process can answer any request (no
session pinned to one process) and nothing is kept between calls.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from gitmem.access import visible_stores
from gitmem.api.mcp import MCP_PATH, authenticate
from gitmem.api.mcp import tools as mcp_tools
from gitmem.api.schemas.stores.conflicts import MemoryConflict, MemoryConflictComparison, MemoryConflictResolution
from gitmem.api.schemas.stores.memories import Memory
from gitmem.api.schemas.stores.memory_stores import MemoryStore as StoreOut
from gitmem.api.schemas.stores.memory_versions import MemoryVersion
from gitmem.api.schemas.stores.search import MemoryVersionDiff, SearchResult, SearchResults
from gitmem.engine.catalog.catalog import Principal
from gitmem.engine.gitmem import MAX_STORES_PAGE, Gitmem
from gitmem.engine.index.search import SearchHit
from gitmem.engine.store.conflict_resolution import ConflictComparison, Resolved
from gitmem.engine.store.conflicts import Conflict
from gitmem.engine.store.diff import VersionDiff
from gitmem.errors import GitmemError
from gitmem.model import Note, Page, StoreInfo, Version

log = logging.getLogger("gitmem.api.mcp")

INSTRUCTIONS = (
    "gitmem memory stores. Paths start with /memories. Every change is a version attributed to you. "
    "Name a store by memory_store_id (list_stores shows them); a task's token defaults to its own store. "
    "An edit refused because the note changed meanwhile is kept as a conflict (the conflicts tool)."
)
StoreArg = Annotated[
    str | None,
    Field(description="The memory store's id (memstore_...); a task's token may leave it out for its own store."),
]


def _text(text: str, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


def _json(value: Any) -> str:
    return json.dumps(_plain(value), ensure_ascii=False)


def _plain(value: Any) -> Any:
    """Engine values as JSON, as the REST API shows them; other dataclasses field by field."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, VersionDiff):
        return _plain(MemoryVersionDiff.of(value))
    if isinstance(value, Conflict):
        return _plain(MemoryConflict.of(value, "basic"))
    if isinstance(value, ConflictComparison):
        return _plain(MemoryConflictComparison.of(value))
    if isinstance(value, Resolved):
        return _plain(MemoryConflictResolution.of(value, None))
    if isinstance(value, Page) and value.items and isinstance(value.items[0], SearchHit):
        return _plain(SearchResults(data=[SearchResult.of(hit) for hit in value.items], next_page=value.next_page))
    if isinstance(value, Note):
        return _plain(Memory.of(value, "basic"))
    if isinstance(value, Version):
        return _plain(MemoryVersion.of(value, "basic"))
    if isinstance(value, StoreInfo):
        return _plain(StoreOut.of(value))
    if isinstance(value, Page):
        return {"data": _plain(value.items), "next_page": value.next_page}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def build_server(gm: Gitmem) -> MCPServer:
    """The tools. Each runs in a worker thread (sync tools) as the credential in its own request."""
    server: MCPServer = MCPServer(name="gitmem", instructions=INSTRUCTIONS, version="0.1.0", log_level="WARNING")

    def call(ctx: Context, fn: Callable[[Principal], str | CallToolResult]) -> CallToolResult:
        """Run ``fn`` as the caller; access and input errors are the tool's answer (is_error), never a crash."""
        try:
            # A scope of its own: the SDK's session runs tools in its own task, outside the request's.
            with gm.leases():
                answer = fn(authenticate(gm, ctx.headers or {}))
        except GitmemError as error:
            return _text(f"{error.api_type}: {error.message}", error=True)
        return answer if isinstance(answer, CallToolResult) else _text(answer)

    def memory(ctx: Context, store_id: str | None, command: dict[str, Any]) -> CallToolResult:
        def run(principal: Principal) -> CallToolResult:
            result = mcp_tools.memory_command(gm, principal, store_id, command)
            return _text(result.content, error=result.is_error)

        return call(ctx, run)

    @server.tool(description="View a folder listing or a file's numbered lines (optionally view_range [start, end]).")
    def view(
        ctx: Context, path: str, view_range: list[int] | None = None, memory_store_id: StoreArg = None
    ) -> CallToolResult:
        command: dict[str, Any] = {"command": "view", "path": path}
        if view_range is not None:
            command["view_range"] = view_range
        return memory(ctx, memory_store_id, command)

    @server.tool(description="Create a new file with file_text (a path already taken is refused).")
    def create(ctx: Context, path: str, file_text: str, memory_store_id: StoreArg = None) -> CallToolResult:
        return memory(ctx, memory_store_id, {"command": "create", "path": path, "file_text": file_text})

    @server.tool(description="Replace the one occurrence of old_str in a file with new_str.")
    def str_replace(
        ctx: Context, path: str, old_str: str, new_str: str = "", memory_store_id: StoreArg = None
    ) -> CallToolResult:
        return memory(
            ctx, memory_store_id, {"command": "str_replace", "path": path, "old_str": old_str, "new_str": new_str}
        )

    @server.tool(description="Insert insert_text after line insert_line (0 inserts at the top).")
    def insert(
        ctx: Context, path: str, insert_line: int, insert_text: str, memory_store_id: StoreArg = None
    ) -> CallToolResult:
        return memory(
            ctx,
            memory_store_id,
            {"command": "insert", "path": path, "insert_line": insert_line, "insert_text": insert_text},
        )

    @server.tool(description="Delete a file or a folder.")
    def delete(ctx: Context, path: str, memory_store_id: StoreArg = None) -> CallToolResult:
        return memory(ctx, memory_store_id, {"command": "delete", "path": path})

    @server.tool(description="Rename or move a file or folder.")
    def rename(ctx: Context, old_path: str, new_path: str, memory_store_id: StoreArg = None) -> CallToolResult:
        return memory(ctx, memory_store_id, {"command": "rename", "old_path": old_path, "new_path": new_path})

    @server.tool(description="The memory stores you may use (id, name, description), newest first.")
    def list_stores(
        ctx: Context, include_archived: bool = False, limit: int = 20, page: str | None = None
    ) -> CallToolResult:
        return call(
            ctx,
            lambda p: _json(
                visible_stores(gm, p, include_archived=include_archived, limit=min(limit, MAX_STORES_PAGE), page=page)
            ),
        )

    @server.tool(description="A note's versions, newest first, by memory_id or by its path (/memories/...).")
    def history(
        ctx: Context,
        memory_id: str | None = None,
        path: str | None = None,
        memory_store_id: StoreArg = None,
        limit: int = 20,
        page: str | None = None,
    ) -> CallToolResult:
        return call(
            ctx,
            lambda p: _json(
                mcp_tools.history(gm, p, memory_store_id, memory_id=memory_id, path=path, limit=limit, page=page)
            ),
        )

    @server.tool(description='Full-text search of a store\'s notes: words ANDed, "a phrase", prefix*, OR.')
    def search(
        ctx: Context,
        query: str,
        path_prefix: str | None = None,
        limit: int = 20,
        page: str | None = None,
        memory_store_id: StoreArg = None,
    ) -> CallToolResult:
        return call(
            ctx,
            lambda p: _json(
                mcp_tools.search(gm, p, memory_store_id, query, path_prefix=path_prefix, limit=limit, page=page)
            ),
        )

    @server.tool(description="A unified diff of a version against another (default: the note's previous one).")
    def diff(
        ctx: Context, version_id: str, against: str | None = None, memory_store_id: StoreArg = None
    ) -> CallToolResult:
        return call(ctx, lambda p: _json(mcp_tools.diff(gm, p, memory_store_id, version_id, against)))

    @server.tool(description="Bring back an old version of a note as a new version (a deleted note too).")
    def restore(
        ctx: Context,
        memory_id: str,
        version_id: str,
        expected_sha256: str | None = None,
        memory_store_id: StoreArg = None,
    ) -> CallToolResult:
        return call(
            ctx, lambda p: _json(mcp_tools.restore(gm, p, memory_store_id, memory_id, version_id, expected_sha256))
        )

    @server.tool(
        description="Edits refused because the note changed meanwhile, kept as conflicts, newest first (of one "
        "note with memory_id; open or resolved with state); with conflict_id, that one with its text, a diff "
        "against the version it lost to and a three-way merge."
    )
    def conflicts(
        ctx: Context,
        memory_id: str | None = None,
        conflict_id: str | None = None,
        state: Literal["open", "resolved"] | None = None,
        limit: int = 20,
        page: str | None = None,
        memory_store_id: StoreArg = None,
    ) -> CallToolResult:
        return call(
            ctx,
            lambda p: _json(
                mcp_tools.conflicts(
                    gm, p, memory_store_id, memory_id=memory_id, conflict_id=conflict_id, state=state, limit=limit,
                    page=page,
                )
            ),
        )  # fmt: skip

    @server.tool(
        description="Resolve a conflict: take the winner (nothing written), the loser (its text written) or merged "
        "(content, or the clean merge), as a new version if the note still holds the winner's text (or "
        "expected_sha256)."
    )
    def resolve_conflict(
        ctx: Context,
        conflict_id: str,
        take: Literal["winner", "loser", "merged"],
        content: str | None = None,
        expected_sha256: str | None = None,
        memory_store_id: StoreArg = None,
    ) -> CallToolResult:
        return call(
            ctx,
            lambda p: _json(
                mcp_tools.resolve_conflict(
                    gm, p, memory_store_id, conflict_id, take, content=content, expected_sha256=expected_sha256
                )
            ),
        )

    return server


async def serve(gm: Gitmem, *, task_status: anyio.abc.TaskStatus[MCPServer] = anyio.TASK_STATUS_IGNORED) -> None:
    """Run the MCP server's session manager until cancelled (in the task group of the app's lifespan);
    ``task_status.started`` hands over the server once it takes requests."""
    server = build_server(gm)
    # The host is not a loopback name, so the SDK adds no DNS-rebinding check: every request must carry
    # a credential a browser on another origin cannot have, which is what that check protects.
    server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, json_response=True, host="0.0.0.0")  # noqa: S104  the MCP SDK's host check: the app is served where gitmem serve binds
    async with server.session_manager.run():
        task_status.started(server)
        await anyio.sleep_forever()
