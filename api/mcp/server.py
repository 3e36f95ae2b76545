"""The MCP server's session manager (the official ``mcp`` package) and its tools, registered from the
table :data:`gitmem.api.mcp.table.TOOLS`; imported by :mod:`gitmem.api.mcp` on the first request to
``/mcp``.

Stateless mode: every POST is answered on its own, so any server process can answer any request (no
session pinned to one process) and nothing is kept between calls.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Annotated, Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from gitmem.api.auth import identify, request_secret
from gitmem.api.mcp import MCP_PATH
from gitmem.api.mcp.answers import text
from gitmem.api.mcp.table import TOOLS, Tool
from gitmem.engine.catalog.catalog import Principal
from gitmem.errors import GitmemError
from gitmem.parts import Parts

log = logging.getLogger("gitmem.api.mcp")

INSTRUCTIONS = (
    "gitmem memory stores. Paths start with /memories. Every change is a version attributed to you. "
    "Name a store by memory_store_id (list_stores shows them); a task's token defaults to its own store. "
    "An edit refused because the note changed meanwhile is kept as a conflict (the conflicts tool)."
)


def build_server(parts: Parts) -> MCPServer:
    """The tools of :data:`TOOLS`. Each runs in a worker thread (sync tools) as the credential in its own
    request."""
    server: MCPServer = MCPServer(name="gitmem", instructions=INSTRUCTIONS, version="0.1.0", log_level="WARNING")
    for tool in TOOLS:
        server.add_tool(_tool_function(parts, tool), name=tool.name, description=tool.description)
    return server


def _call(parts: Parts, ctx: Context, fn: Callable[[Principal], str | CallToolResult]) -> CallToolResult:
    """Run ``fn`` as the caller; access and input errors are the tool's answer (is_error), never a crash."""
    gm = parts.gm
    headers = ctx.headers or {}
    try:
        # A scope of its own: the SDK's session runs tools in its own task, outside the request's.
        with gm.leases():
            answer = fn(identify(gm, request_secret(headers), headers))
    except GitmemError as error:
        return text(f"{error.api_type}: {error.message}", error=True)
    return answer if isinstance(answer, CallToolResult) else text(answer)


def _tool_function(parts: Parts, tool: Tool) -> Callable[..., CallToolResult]:
    """A function for the SDK to register: it reads a tool's input schema from a function's signature, so
    this one's is the tool's argument model, field by field (with the context the SDK passes)."""

    def run(ctx: Context, **arguments: Any) -> CallToolResult:
        return _call(parts, ctx, lambda principal: tool.run(parts, principal, tool.arguments(**arguments)))

    parameters = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)]
    annotations: dict[str, Any] = {"ctx": Context}
    for name, field in tool.arguments.model_fields.items():
        annotation: Any = field.annotation
        if field.description:
            annotation = Annotated[annotation, Field(description=field.description)]
        default = inspect.Parameter.empty if field.is_required() else field.default
        parameters.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        )
        annotations[name] = annotation
    run.__signature__ = inspect.Signature(parameters, return_annotation=CallToolResult)  # type: ignore[attr-defined]
    run.__annotations__ = annotations | {"return": CallToolResult}
    run.__name__ = run.__qualname__ = tool.name
    return run


async def serve(parts: Parts, *, task_status: anyio.abc.TaskStatus[MCPServer] = anyio.TASK_STATUS_IGNORED) -> None:
    """Run the MCP server's session manager until cancelled (in the task group of the app's lifespan);
    ``task_status.started`` hands over the server once it takes requests."""
    server = build_server(parts)
    # The host is not a loopback name, so the SDK adds no DNS-rebinding check: every request must carry
    # a credential a browser on another origin cannot have, which is what that check protects.
    server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, json_response=True, host="0.0.0.0")  # noqa: S104  the MCP SDK's host check: the app is served where gitmem serve binds
    async with server.session_manager.run():
        task_status.started(server)
        await anyio.sleep_forever()
