"""The readiness probe's answer (``/readyz``); liveness's is :class:`~gitmem.api.schemas.common.Health`."""

from __future__ import annotations

from typing import Literal

from gitmem.api.schemas.common import OutModel


class OpenStores(OutModel):
    """The stores this process holds open (the bounded cache: gitmem/engine/open_stores.py)."""

    open: int
    in_use: int
    capacity: int
    evictions: int  # closed to stay within capacity or descriptors, since the process started
    idle_closes: int  # closed after a few seconds unused
    free_descriptors: int | None  # files the process may still open (None: unlimited or unknown)
    descriptor_limit: int | None


class Readiness(OutModel):
    """``ready``, or ``unready`` with why, check by check (``catalog``, ``home``, ``disk``, ``draining``);
    and this process's open stores."""

    status: Literal["ready", "unready"]
    failing: dict[str, str] = {}  # noqa: RUF012  pydantic copies a field's default for each model
    stores: OpenStores | None = None
