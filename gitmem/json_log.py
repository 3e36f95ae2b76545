"""``GITMEM_LOG_FORMAT=json``: one JSON object a line, for log shippers (docs/deploy.md, "Logs").

Every line has ``time`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger`` and ``message``; a
line about a request (the server's access log, ``gitmem.access``) also has the fields of
:data:`REQUEST_FIELDS`: the ``request_id`` the error envelope carries, the route *template* (never the
path with its query string), the status, the duration, and who called (workspace, actor type and id).
A record's other attributes are never copied into the line: what a line may hold is this list, so a
key, a token, a query string or a note's content cannot reach the log through an ``extra=``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import Any, Literal

LogFormat = Literal["text", "json"]

REQUEST_FIELDS = (
    "request_id",
    "method",
    "route",
    "status",
    "duration_ms",
    "workspace_id",
    "actor_type",
    "actor_id",
)
ACCESS_LOGGER = "gitmem.access"
TEXT_FORMAT = "%(levelname)s:%(name)s:%(message)s"  # what logging.basicConfig writes


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON with the fields above (and ``exception``, a traceback, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in REQUEST_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False, default=str)


def formatter(log_format: LogFormat) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)


def install(log_format: LogFormat, level: str) -> None:
    """Give the root logger a handler on standard error in ``log_format``, unless the program has one
    already (``gitmem serve`` configures uvicorn's and the root's logging itself: :func:`uvicorn_config`)."""
    root = logging.getLogger()
    root.setLevel(level)
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(formatter(log_format))
        root.addHandler(handler)


def uvicorn_config(base: dict[str, Any], log_format: LogFormat, level: str) -> dict[str, Any]:
    """uvicorn's ``log_config`` (``base``, a copy of its default) for ``log_format``. In JSON every logger
    writes JSON to standard error, and uvicorn's access log is off: the app writes its own
    (:data:`ACCESS_LOGGER`), which knows the route template and the caller."""
    if log_format != "json":
        return base
    config = dict(base)
    config["formatters"] = {"json": {"()": f"{__name__}.JsonFormatter"}}
    config["handlers"] = {
        "default": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    }
    config["loggers"] = {
        "uvicorn": {"handlers": ["default"], "level": level, "propagate": False},
        "uvicorn.error": {"level": level},
        "uvicorn.access": {"handlers": [], "level": "CRITICAL", "propagate": False},
    }
    config["root"] = {"handlers": ["default"], "level": level}
    config.pop("filters", None)
    return config
