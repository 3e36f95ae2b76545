"""A task's event log: append-only (``task_events``; updates and deletes are refused by triggers while
the task exists), read oldest first. :class:`~gitmem.agents.tasks.tasks.Tasks` builds on this; use it through
``tasks_for(gm)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gitmem import ids
from gitmem.agents.tasks.tables import MIGRATIONS
from gitmem.agents.tasks.values import MAX_EVENT_PAYLOAD_BYTES, MAX_INT, MAX_PAGE, Event, actor_text
from gitmem.clock import from_micros
from gitmem.engine.gitmem import HomeTables
from gitmem.errors import InvalidRequest, NotFound, TooLarge
from gitmem.model import Actor, Page
from gitmem.rules.paging import check_limit
from gitmem.rules.policy import check_text

_EVENT_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")


class TaskEvents(HomeTables):
    """The event logs of one data home's tasks."""

    MIGRATIONS = MIGRATIONS

    def append_event(
        self, task_id: str, type: str, payload: Mapping[str, Any] | None = None, *, actor: Actor | None = None
    ) -> Event:
        """Add an event to the end of the task's log. There is no update and no delete."""
        if not isinstance(type, str) or not _EVENT_TYPE.fullmatch(type):
            raise InvalidRequest(
                "an event type is 1 to 64 characters of letters, digits and _ . : -,"
                " starting with a letter or digit (e.g. 'agent.message')"
            )
        payload = {} if payload is None else payload
        if not isinstance(payload, Mapping):
            raise InvalidRequest("an event payload is a JSON object")
        check_text(payload, "an event payload")
        try:
            text = json.dumps(dict(payload), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise InvalidRequest(f"an event payload must be plain JSON: {exc}") from None
        if len(text.encode("utf-8")) > MAX_EVENT_PAYLOAD_BYTES:
            raise TooLarge(f"an event payload is at most {MAX_EVENT_PAYLOAD_BYTES} bytes of JSON")
        self.gm.filters.check_caller_text("the event payload", payload)
        event_id = ids.new_id("taskevt")
        with self.catalog.transaction() as db:
            if db.execute("SELECT 1 FROM tasks WHERE id=?", (task_id,)).fetchone() is None:
                raise NotFound(f"task {task_id} not found")
            (seq,) = db.execute(
                "SELECT coalesce(max(seq), 0) + 1 FROM task_events WHERE task_id=?", (task_id,)
            ).fetchone()
            db.execute(
                "INSERT INTO task_events (task_id, seq, id, type, payload, created_by, created_at)"
                " VALUES (?,?,?,?,?,?,?)",
                (task_id, seq, event_id, type, text, actor_text(actor), self._now()),
            )
        row = self.db.execute("SELECT * FROM task_events WHERE id=?", (event_id,)).fetchone()
        return _event(row)

    def list_events(
        self,
        task_id: str,
        after_seq: int | None = None,
        limit: int = 20,
        page: str | None = None,
        types: Sequence[str] | None = None,
    ) -> Page[Event]:
        """Oldest first. ``after_seq`` or ``page`` (the previous page's ``next_page``) starts after an
        event; ``next_page`` is ``None`` on the last page."""
        check_limit(limit, MAX_PAGE)
        if page:
            (after_seq,) = self.gm.page_tokens.decode(page, f"events:{task_id}", int)
        if after_seq is not None and (
            isinstance(after_seq, bool) or not isinstance(after_seq, int) or not 0 <= after_seq <= MAX_INT
        ):
            raise InvalidRequest("after_seq must be a non-negative integer")
        sql, args = "SELECT * FROM task_events WHERE task_id=? AND seq>?", [task_id, after_seq or 0]
        if types:
            sql += f" AND type IN ({','.join('?' * len(types))})"
            args += list(types)
        rows = self.db.execute(sql + " ORDER BY seq LIMIT ?", (*args, limit + 1)).fetchall()
        items = [_event(r) for r in rows[:limit]]
        token = self.gm.page_tokens.encode(f"events:{task_id}", items[-1].seq) if len(rows) > limit else None
        return Page(items, token)


def _event(row: Any) -> Event:
    return Event(
        row["id"],
        row["task_id"],
        row["seq"],
        row["type"],
        json.loads(row["payload"]),
        Actor.from_trailer(row["created_by"] or ""),
        from_micros(row["created_at"]),
    )
