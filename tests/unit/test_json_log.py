"""GITMEM_LOG_FORMAT=json's lines (gitmem/json_log.py): one object a line, only the listed fields."""

from __future__ import annotations

import json
import logging

from gitmem.json_log import JsonFormatter


def _line(record: logging.LogRecord) -> dict[str, object]:
    text = JsonFormatter().format(record)
    assert "\n" not in text
    line: dict[str, object] = json.loads(text)
    return line


def test_a_request_line_holds_the_listed_fields_and_nothing_else() -> None:
    record = logging.LogRecord("gitmem.access", logging.INFO, __file__, 1, "GET %s %d", ("/x/{id}", 200), None)
    fields = {"request_id": "req_1", "route": "/x/{id}", "status": 200, "duration_ms": 1.5, "actor_type": "api_actor"}
    record.__dict__.update(fields, api_key="gm_key_secret", query="q=secret", content="a note's text")
    line = _line(record)
    assert line["message"] == "GET /x/{id} 200"
    assert {k: line[k] for k in fields} == fields
    assert {"time", "level", "logger"} <= line.keys()
    assert "secret" not in json.dumps(line) and "note" not in json.dumps(line)


def test_an_exception_is_one_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("gitmem.api", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = _line(record)
    assert line["level"] == "ERROR" and "ValueError: boom" in str(line["exception"])
