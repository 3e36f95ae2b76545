"""``gitmem mcp``: a stdio MCP server for desktop clients that only speak stdio, relaying every message to
a gitmem server's ``/mcp`` over streamable HTTP.

It never opens a data home or a store: every client gets the server's single writer path, so several
desktop sessions never contend for one SQLite file on their own.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable
from typing import Protocol

import anyio
import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

log = logging.getLogger(__name__)


class _Sink(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...


async def _relay(source: AsyncIterable[SessionMessage | Exception], sink: _Sink, direction: str) -> None:
    async for message in source:
        if isinstance(message, Exception):  # an unreadable line or response: say so, keep relaying
            log.warning("mcp bridge (%s): %s", direction, message)
            continue
        await sink.send(message)


class BridgeRefused(Exception):
    """The server cannot be reached or refuses the credential: said once, at start, not per message."""


async def check_server(http: httpx2.AsyncClient, url: str) -> None:
    try:
        response = await http.get(url.rstrip("/") + "/v1/memory_stores", params={"limit": 1})
    except httpx2.HTTPError as exc:
        raise BridgeRefused(f"cannot reach the gitmem server at {url}: {type(exc).__name__}") from None
    if response.status_code in (401, 403):
        raise BridgeRefused(f"the gitmem server at {url} refused the key (HTTP {response.status_code})")


async def run_bridge(url: str, key: str, *, timeout: float = 60.0) -> None:
    """Relay stdio <-> ``{url}/mcp`` with ``Authorization: Bearer key`` until stdin closes."""
    endpoint = url.rstrip("/") + "/mcp"
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        await check_server(http, url)
        await _serve(http, endpoint)


async def _serve(http: httpx2.AsyncClient, endpoint: str) -> None:
    async with (
        streamable_http_client(endpoint, http_client=http) as (http_read, http_write),
        stdio_server() as (stdio_read, stdio_write),
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(_relay, http_read, stdio_write, "server to client")
        await _relay(stdio_read, http_write, "client to server")
        tasks.cancel_scope.cancel()  # stdin closed: the client is gone
