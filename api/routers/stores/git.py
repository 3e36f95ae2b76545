"""Git's smart HTTP at ``/v1/memory_stores/{id}.git/...``: a raw ASGI route, streaming both ways.

Authentication and the rate limit are the API's (:func:`gitmem.api.auth.caller`; Git sends the key as
the Basic-auth password, Bearer and x-api-key work too), refusals in Git's terms (401 with a Basic
challenge, 429 with Retry-After, a line Git prints); the store is the API's
(:meth:`gitmem.parts.Parts.grant`): another workspace's is 404; read access clones, a user with write
access pushes. The Git side (``git http-backend``, what may be served) is
``gitmem.git.transport.smart_http``.

Raw ASGI rather than a StreamingResponse: Starlette would call ``receive()`` to watch for a disconnect
while a push body is still arriving and swallow chunks of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool

from gitmem.api.auth import caller
from gitmem.config.handoff import checked_for
from gitmem.engine.catalog.catalog import Principal
from gitmem.engine.gitmem import Gitmem
from gitmem.errors import AuthenticationFailed, GitmemError, NotFound, RateLimited, StoreBusy
from gitmem.git.repository import HOOKS_DIR
from gitmem.git.transport.smart_http import (
    GitResponse,
    basic_auth_secret,
    serve_git,
    text_response,
    unauthorized_response,
)
from gitmem.parts import Parts

log = logging.getLogger("gitmem.api.git")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

GIT_PATH = re.compile(r"/v1/memory_stores/([A-Za-z0-9_-]+)\.git(/.*)")
PUSH_NEEDS_USER = "gitmem: push with a user's token (gitmem users create); API keys and tasks use the API"


class AsgiBody:
    """The request body as an iterator; once it has all arrived, ``disconnected`` watches receive()."""

    def __init__(self, receive: Receive, has_body: bool) -> None:
        self._receive = receive
        self._complete = asyncio.Event()
        if not has_body:
            self._complete.set()

    async def chunks(self) -> AsyncIterator[bytes]:
        while not self._complete.is_set():
            message = await self._receive()
            if message["type"] == "http.disconnect":
                raise ConnectionError("client disconnected")
            if not message.get("more_body", False):
                self._complete.set()  # receive() is free for the watcher from here on
            yield message.get("body", b"")

    async def disconnected(self) -> None:
        await self._complete.wait()
        while (await self._receive())["type"] != "http.disconnect":
            pass


async def send_git_response(response: GitResponse, send: Send, body: AsgiBody) -> None:
    async def stream() -> None:
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in response.headers]
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        async for chunk in response.body:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    # uvicorn's send() silently drops data once the client is gone, so watch for the disconnect.
    streamer = asyncio.create_task(stream())
    watcher = asyncio.create_task(body.disconnected())
    try:
        await asyncio.wait({streamer, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        streamer.cancel()
        await response.aclose()
        with contextlib.suppress(asyncio.CancelledError):
            await streamer


# Settings the hooks must see as the server does (git http-backend gets a scrubbed environment).
INHERITED_SETTINGS = (
    "GITMEM_FILTERS",
    "GITMEM_SECRETS_ALLOW",
    "GITMEM_FSYNC",
    "GITMEM_MASTER_KEY",
    "GITMEM_MASTER_KEY_FILE",
)


def push_environment(gm: Gitmem, principal: Principal, store_id: str, access: str) -> dict[str, str]:
    """What the pre-/post-receive hooks need to apply the rules and attribute the push, with the
    settings among it as checked here (``GITMEM_CHECKED``: a hook need not load the settings object)."""
    database = gm.index_database_url  # the hooks read the catalog and write the index where the server does
    environment = {
        **{name: os.environ[name] for name in INHERITED_SETTINGS if name in os.environ},
        **({"GITMEM_DATABASE": database} if database else {}),
        "GITMEM_HOME": str(gm.home.resolve()),
        "GITMEM_STORE_ID": store_id,
        "GITMEM_USER_ID": principal.actor.id,
        "GITMEM_ACCESS": access,
        "GITMEM_PYTHON": sys.executable,
    }
    return environment | checked_for(environment)


class GitEndpoint:
    """Resolve the caller and the store, then hand the request to ``serve_git``."""

    def __init__(self, parts_of: Callable[[Scope], Parts]) -> None:
        self._parts_of = parts_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = AsgiBody(receive, scope["method"] == "POST")
        with contextlib.ExitStack() as held:  # a push's store lock, released once Git is done
            response = await self._respond(scope, body, held)
            try:
                await send_git_response(response, send, body)
            finally:
                await run_in_threadpool(held.close)

    async def _respond(self, scope: Scope, body: AsgiBody, held: contextlib.ExitStack) -> GitResponse:
        match = GIT_PATH.fullmatch(scope["path"])
        if match is None:
            return text_response(404, "not found")
        store_id, path_info = match.groups()
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        parts = self._parts_of(scope)
        gm = parts.gm
        resolved = await _resolve(parts, headers, store_id, scope)
        if isinstance(resolved, GitResponse):
            return resolved
        principal, access = resolved
        query = scope["query_string"].decode("latin-1")
        # Without gitmem's hooks nothing would check a push (an install that lacks hooks/): refuse it.
        can_push = access == "read_write" and principal.actor.type == "user_actor" and HOOKS_DIR.is_dir()
        wants_push = path_info == "/git-receive-pack" or "service=git-receive-pack" in query
        if wants_push and not can_push:
            return text_response(403, PUSH_NEEDS_USER if access == "read_write" else "gitmem: this key may only read")
        if path_info == "/git-receive-pack" and can_push:
            try:  # one writer a store across nodes: receive-pack and its hooks run under the store's lock
                await run_in_threadpool(_lock_store, gm, principal, store_id, held)
            except StoreBusy as exc:
                return text_response(503, f"gitmem: {exc.message}")
        return await serve_git(
            gm.repo_path(store_id),
            method=scope["method"],
            path_info=path_info,
            query_string=query,
            headers=headers,
            body=body.chunks(),
            remote_user=principal.actor.id,
            allow_push=can_push,
            extra_env=push_environment(gm, principal, store_id, access) if can_push else {},
            hooks_path=HOOKS_DIR,  # a store's own config cannot turn gitmem's rules off
        )


def _lock_store(gm: Gitmem, principal: Principal, store_id: str, held: contextlib.ExitStack) -> None:
    """The store's writer lock across nodes (PostgreSQL), held by ``held`` (nothing on SQLite, where
    Git's ref lock alone orders a push against other writers, as it always has)."""
    held.enter_context(gm.store(principal.workspace_id, store_id).index.cluster_writer_lock())


def _too_many(message: str, retry_after: float) -> GitResponse:
    return text_response(429, f"gitmem: {message}", [("Retry-After", str(max(1, math.ceil(retry_after))))])


async def _resolve(
    parts: Parts, headers: dict[str, str], store_id: str, scope: Scope
) -> tuple[Principal, str] | GitResponse:
    """The caller and their access to the store, or the answer that refuses them in Git's terms."""
    try:
        # Git's push checks its own access below: a read-only key fetches with POSTs too.
        principal = await caller(scope, basic_auth_secret(headers), headers, write=False)
        # Catalog reads may wait on SQLite's busy timeout: in a worker thread, not on the event loop.
        grant = await run_in_threadpool(lambda: parts.grant(principal, store_id, write=False))
    except AuthenticationFailed:
        return unauthorized_response()  # a Basic challenge: Git asks its credential helper and retries
    except RateLimited as limited:
        return _too_many(limited.message, limited.retry_after)
    except NotFound:
        return text_response(404, "gitmem: repository not found")
    except GitmemError as refused:
        return text_response(refused.status, f"gitmem: {refused.message}")
    if grant.reads_approved_only:  # Git would hand over unreviewed history
        return text_response(403, "gitmem: a task reads only this store's approved state; use the memories API")
    return principal, grant.access
