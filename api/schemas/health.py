"""The readiness probe's answer (``/readyz``); liveness's is :class:`~gitmem.api.schemas.common.Health`."""

from __future__ import annotations

from typing import Literal

from gitmem.api.schemas.common import OutModel


class Readiness(OutModel):
    """``ready``, or ``unready`` with why, check by check (``catalog``, ``home``, ``disk``, ``draining``)."""

    status: Literal["ready", "unready"]
    failing: dict[str, str] = {}  # noqa: RUF012  pydantic copies a field's default for each model
