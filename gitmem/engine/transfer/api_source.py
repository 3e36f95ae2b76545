"""Another server's store as an import's source, read through the official ``anthropic`` SDK
(``client.beta.memory_stores.memory_versions``): the hosted memory stores API, or another gitmem.

The SDK lists versions newest first, 20 a page with their content (``view=full``). The listing is
spooled, a page at a time, into the import's journal (``listing.jsonl``, and ``listing.json`` with the
next page's token and how much of the spool it covers), so an import killed while listing goes on from
the page it had reached; the replay then reads the spool backwards, oldest first. A source's versions
keep their ids (the ``Memory-Id`` and ``Memory-Version`` trailers: they survive every later rewrite),
their operation, path, content, actor and time; a redacted one stays redacted. A live note's creation
time is the server's (one listing of the notes), another's its oldest listed version's. The SDK's
``session_actor`` is gitmem's ``task_actor``, as the API maps them.

This module only calls the client it is handed; :meth:`ApiSource.connect` makes one where a program
starts (the CLI), with the base URL and key it was given, and the CLI closes it (``with`` the source).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gitmem.engine.store.store import MemoryStore
from gitmem.engine.transfer.journal import Journal, crash_point
from gitmem.engine.transfer.replay import Progress
from gitmem.engine.transfer.values import Incoming, Refused, StoreFields
from gitmem.errors import InvalidRequest
from gitmem.git.commits import VersionRecord, parse_time
from gitmem.model import Actor

log = logging.getLogger(__name__)

PAGE = 20  # the most a page of versions with their content holds
_ACTOR_IDS = {
    "session_actor": ("task_actor", "session_id"),
    "task_actor": ("task_actor", "task_id"),
    "api_actor": ("api_actor", "api_key_id"),
    "user_actor": ("user_actor", "user_id"),
    "service_account_actor": ("service_account_actor", "service_account_id"),
}


class ApiSource:
    """The store ``store_id`` of the server ``client`` speaks to (an ``anthropic.Anthropic``)."""

    def __init__(self, client: Any, store_id: str, base_url: str) -> None:
        self.client = client
        self.store_id = store_id
        self.base_url = base_url.rstrip("/")
        self._spool: Path | None = None
        self._created: dict[str, str] = {}

    @classmethod
    def connect(cls, base_url: str, api_key: str, store_id: str) -> ApiSource:
        import anthropic

        return cls(anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=8), store_id, base_url)

    def __enter__(self) -> ApiSource:
        return self

    def __exit__(self, *exc: object) -> None:
        # Its client's connection pool: whoever made the source with ``with`` (the CLI) owns the client.
        self.client.close()

    @property
    def key(self) -> str:
        return f"api {self.base_url} {self.store_id}"

    def fields(self) -> StoreFields:
        found = self.client.beta.memory_stores.retrieve(self.store_id)
        return StoreFields(found.name, found.description or "", dict(found.metadata or {}))

    def prepare(self, store: MemoryStore, spool: Journal, progress: Progress) -> int:  # noqa: ARG002  the Source protocol's signature
        """List every version into the spool, going on from where an earlier run stopped."""
        spool.folder.mkdir(parents=True, exist_ok=True)
        self._spool = spool.folder / "listing.jsonl"
        state_path = spool.folder / "listing.json"
        state = _read_state(state_path)
        versions = self.client.beta.memory_stores.memory_versions
        with open(self._spool, "ab") as out:
            out.truncate(state["bytes"])  # a page written after the last state was saved is listed again
            out.seek(state["bytes"])
            while not state["listed"]:
                progress("listing", state["count"], None)
                page = versions.list(self.store_id, limit=PAGE, view="full", **_page(state["next_page"]))
                for item in page.data:
                    out.write(json.dumps(item.model_dump(mode="json"), ensure_ascii=False).encode() + b"\n")
                out.flush()
                state = {
                    "next_page": page.next_page,
                    "bytes": out.tell(),
                    "count": state["count"] + len(page.data),
                    "listed": not page.next_page,
                }
                _write_state(state_path, state)
                crash_point("listing", state["count"])
        progress("listing", state["count"], state["count"])
        self._created = self._note_times(spool.folder / "notes.json")
        return int(state["count"])

    def _note_times(self, path: Path) -> dict[str, str]:
        """When each live note was made, as the server says (its oldest version may be gone to retention):
        one listing of the notes, 100 a page, kept beside the spool."""
        try:
            return dict(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            pass
        notes = self.client.beta.memory_stores.memories.list(self.store_id, limit=100)
        made = {n.id: n.created_at.isoformat() for n in notes if getattr(n, "type", "") == "memory"}
        _write_state(path, made)
        return made

    def versions(self) -> Iterator[Incoming]:
        """The spooled versions, oldest first (the spool is newest first)."""
        assert self._spool is not None, "prepare first"  # noqa: S101  narrows the type for mypy; never a check of input
        with open(self._spool, "rb") as spool:
            offsets = []
            while True:
                offsets.append(spool.tell())
                if not spool.readline():
                    offsets.pop()
                    break
            first_seen = {memory_id: parse_time(when) for memory_id, when in self._created.items()}
            for offset in reversed(offsets):
                spool.seek(offset)
                yield incoming_from_sdk(json.loads(spool.readline()), first_seen)

    def refused(self) -> tuple[Refused, ...]:
        return ()


def _page(token: str | None) -> dict[str, str]:
    return {"page": token} if token else {}


def _read_state(path: Path) -> dict[str, Any]:
    try:
        state = json.loads(path.read_text())
        if isinstance(state, dict) and {"next_page", "bytes", "count", "listed"} <= state.keys():
            return state
    except (OSError, ValueError):
        pass
    return {"next_page": None, "bytes": 0, "count": 0, "listed": False}


def _write_state(path: Path, state: dict[str, Any] | dict[str, str]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(state))
    os.replace(temporary, path)  # a SIGKILL leaves the old state or the new, never half of one


def _actor(data: object) -> Actor | None:
    if data is None:
        return None
    if not isinstance(data, dict) or data.get("type") not in _ACTOR_IDS:
        raise InvalidRequest(f"{data!r} is not an actor gitmem knows")
    kind, field = _ACTOR_IDS[data["type"]]
    return Actor(kind, str(data.get(field) or ""))  # type: ignore[arg-type]


def incoming_from_sdk(data: dict[str, Any], first_seen: dict[str, dt.datetime]) -> Incoming:
    """A memory version as the SDK gives it (``model_dump(mode="json")``), as a version to replay;
    ``first_seen`` (memory id -> its oldest version's time) is filled as versions come, oldest first."""
    try:
        created_at = parse_time(str(data["created_at"]))
        memory_id = str(data["memory_id"])
        record = VersionRecord(
            memory_id=memory_id,
            version_id=str(data["id"]),
            operation=data["operation"],
            path=data.get("path"),
            content_sha256=data.get("content_sha256"),
            content_size=data.get("content_size_bytes"),
            created_by=_actor(data.get("created_by")),
            created_at=created_at,
            note_created_at=first_seen.setdefault(memory_id, created_at),
            redacted_at=parse_time(str(data["redacted_at"])) if data.get("redacted_at") else None,
            redacted_by=_actor(data.get("redacted_by")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidRequest(f"the server listed something that is not a memory version: {exc}") from None
    content = data.get("content")
    return Incoming(record, content if isinstance(content, str) else None)


__all__ = ["ApiSource", "incoming_from_sdk"]
