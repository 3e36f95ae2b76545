"""The FastAPI application: ``create_app(gm, settings)``, and the factory ``create_app_from_env`` for
``uvicorn --factory gitmem.api.app:create_app_from_env`` (what ``gitmem serve`` runs).

Importing this module opens nothing; the factory opens the data home in each worker process.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

from fastapi import APIRouter, FastAPI
from fastapi.openapi.utils import get_openapi

from gitmem import json_log, metrics
from gitmem.agents.dreams.runner import DreamRunner
from gitmem.api import errors, mcp
from gitmem.api.deps import PUBLIC_PATHS, SECURITY_SCHEMES
from gitmem.api.draining import Drain
from gitmem.api.middleware import RequestContextMiddleware
from gitmem.api.ratelimit import TokenBucketLimiter, WrongSecrets
from gitmem.api.routers import health, maintenance, users, webhooks
from gitmem.api.routers import metrics as metrics_router
from gitmem.api.routers.agents import dreams, profiles, tasks, workers
from gitmem.api.routers.stores import (
    audit,
    conflicts,
    memories,
    memory_stores,
    memory_tool,
    memory_versions,
    review,
    search,
)
from gitmem.api.routers.stores.git import GitEndpoint
from gitmem.api.settings import Settings
from gitmem.api.ui import account_router
from gitmem.api.ui import router as ui_router
from gitmem.config.home import open_home
from gitmem.config.settings import SettingsError, load_settings
from gitmem.config.values import from_settings
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.readiness import ReadinessProbe
from gitmem.engine.rewrite.pruner import PruneScheduler
from gitmem.parts import Parts
from gitmem.webhooks.delivery import Dispatcher

log = logging.getLogger("gitmem.api")
SAMPLE_SECONDS = 5.0

__all__ = ["Settings", "create_app", "create_app_from_env"]


def create_app(gm: Gitmem, settings: Settings | None = None, *, close_on_shutdown: bool = False) -> FastAPI:
    """An app serving ``gm``. The caller owns ``gm`` unless ``close_on_shutdown`` is set."""
    settings = settings or Settings.defaults()
    parts = Parts(gm)  # the home's parts, handed to the routes (api.deps.HomeParts), MCP and Git
    gm.listen(parts.webhooks)  # every change the app makes reaches the outbox
    app = FastAPI(
        title="gitmem",
        summary="A memory store for AI agents in which every store is a bare Git repository",
        version="0.1.0",
        lifespan=_lifespan(gm, settings, close_on_shutdown),
        redoc_url=None,
    )
    _set_state(app, parts, settings)
    if settings.metrics_token:
        metrics.enable(settings.metrics_dir)
    errors.install(app)
    _mount(app)
    app.add_middleware(
        RequestContextMiddleware,
        max_body_bytes=settings.max_body_bytes,
        unlimited_paths=settings.unlimited_body_paths,
        drain=app.state.drain,
        access_log=settings.access_log,
    )
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _set_state(app: FastAPI, parts: Parts, settings: Settings) -> None:
    """What the routes, the dependencies and the raw endpoints find on ``app.state``."""
    gm = parts.gm
    app.state.gm = gm
    app.state.parts = parts
    app.state.settings = settings
    app.state.retention = maintenance.RetentionStatus(settings.prune_interval_seconds)
    app.state.dream_runner = None  # started with the app (lifespan), if this process runs dreams
    app.state.limiter = TokenBucketLimiter(settings.rate_limit_per_second, settings.rate_limit_burst)
    wrong_rate = settings.wrong_secret_per_second if settings.rate_limit_per_second > 0 else 0.0
    app.state.wrong_secrets = WrongSecrets(wrong_rate, settings.wrong_secret_burst)
    app.state.drain = Drain()
    app.state.readiness = ReadinessProbe(gm.database, gm.home, min_free_bytes=settings.ready_min_free_bytes)


# Notes first: a request is matched against the routes in order, and these are the busiest.
ROUTERS: tuple[APIRouter, ...] = (
    memories.router,
    health.router,
    audit.router,
    memory_stores.router,
    memory_versions.router,
    conflicts.router,
    memory_tool.router,
    workers.router,
    tasks.router,
    profiles.router,
    maintenance.router,
    dreams.router,
    search.router,
    review.router,
    ui_router,  # the web view at /ui/
    account_router,
    webhooks.router,
    users.router,
    metrics_router.router,
)


def _mount(app: FastAPI) -> None:
    """The routers, then the two raw ASGI endpoints (Git and MCP), outside FastAPI's request handling."""
    for router in ROUTERS:
        app.include_router(router)
    # Git's smart HTTP: streaming both ways. (Starlette runs an endpoint that is not a function as an ASGI
    # app; its stub only names functions.)
    app.router.add_route(
        "/v1/memory_stores/{memory_store_id}.git/{path:path}",
        GitEndpoint(lambda scope: scope["app"].state.parts),  # type: ignore[arg-type]
        methods=["GET", "POST"],
        include_in_schema=False,
    )
    # MCP over streamable HTTP: the SDK's session manager answers it.
    app.router.add_route(
        mcp.MCP_PATH,
        mcp.MCPEndpoint(),  # type: ignore[arg-type]
        methods=["GET", "POST", "DELETE"],
        include_in_schema=False,
    )


class _Background(Protocol):
    def signal_stop(self) -> None: ...

    def stop(self, timeout: float) -> object: ...


def _lifespan(
    gm: Gitmem, settings: Settings, close_on_shutdown: bool
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """What runs while the app serves: the drain's signal handlers, the gauges' sampler, the background
    threads this process runs (retention, dreams, webhook delivery) and MCP's task group."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        drain: Drain = app.state.drain
        drain.install(settings.drain_seconds)
        sampler = asyncio.create_task(_sample_process(gm)) if metrics.enabled() else None
        pruner, dispatcher = _start_background(app, gm, settings)
        async with mcp.running(app.state):
            yield
        # The stop's bound (api/draining.py): what is left of it after the drain and the requests in
        # flight is shared by the background threads, each told to stop first so they stop together.
        since = drain.since if drain.since is not None else time.monotonic()
        deadline = since + settings.drain_seconds + settings.stop_timeout_seconds
        stopping: list[_Background] = [x for x in (dispatcher, app.state.dream_runner, pruner) if x is not None]
        for background in stopping:
            background.signal_stop()
        for background in stopping:
            background.stop(timeout=max(0.2, deadline - time.monotonic()))
        if sampler is not None:
            sampler.cancel()
        app.state.readiness.close()
        metrics.process_stopped()
        close = getattr(gm, "close", None)
        if close_on_shutdown and callable(close):
            close()

    return lifespan


def _start_background(app: FastAPI, gm: Gitmem, settings: Settings) -> tuple[PruneScheduler | None, Dispatcher | None]:
    """The retention pruner, the dream runner (on ``app.state``) and the webhooks' dispatcher, each if
    this process runs it."""
    pruner = None
    if settings.prune_interval_seconds > 0:
        pruner = PruneScheduler(gm, settings.prune_interval_seconds, on_reports=app.state.retention.record).start()
    if settings.dream_runner:
        app.state.dream_runner = DreamRunner(
            gm,
            settings.dreamer,
            poll_interval=settings.dream_poll_seconds,
            timeout_seconds=settings.dream_timeout_seconds,
        ).start()
    dispatcher = None
    if settings.webhook_delivery:
        dispatcher = Dispatcher(gm, settings.webhook_policy).start(settings.webhook_poll_seconds)
    return pruner, dispatcher


async def _sample_process(gm: Gitmem) -> None:
    """Refresh this process's own gauges now and then (a scrape may be answered by another worker)."""
    while True:
        metrics_router.sample(gm)
        await asyncio.sleep(SAMPLE_SECONDS)


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema without its 422 responses (validation failures are 400s in the envelope), with
    the ways to authenticate on every operation that needs a key (see ``api.deps.SECURITY_SCHEMES``)."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
        for path, path_item in schema.get("paths", {}).items():
            for operation in path_item.values():
                if isinstance(operation, dict):
                    operation.get("responses", {}).pop("422", None)
                    if path not in PUBLIC_PATHS:
                        operation["security"] = [{name: []} for name in SECURITY_SCHEMES]
        schema.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
        schemas = schema.get("components", {}).get("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        app.openapi_schema = schema
    return app.openapi_schema


def create_app_from_env() -> FastAPI:
    """The app for the data home in ``GITMEM_HOME`` (else the engine's default home). Every setting is
    checked first: a bad one stops the process (exit 2) with one line, before it serves anything."""
    try:
        settings = load_settings()
    except SettingsError as exc:
        sys.stderr.write(f"gitmem: {exc.message}\n")
        raise SystemExit(2) from None
    config = from_settings(settings)
    json_log.install(config.serving.log_format, config.serving.log_level or "INFO")
    gm = open_home(config)
    stores = gm.open_stores()
    log.info(
        "serving gitmem home %s (up to %d stores open at once, for a limit of %s open files)",
        gm.home,
        stores.capacity,
        stores.descriptor_limit or "unlimited",
    )
    return create_app(gm, Settings.from_config(config), close_on_shutdown=True)
