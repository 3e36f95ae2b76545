"""How an index file keeps hashes and ids: their bytes, not their text (issue 34's disk).

A Git id or a SHA-256 is half as long as its hex, and an id made by :mod:`gitmem.ids` is 16 bytes
behind its 30-odd characters; every note's rows and their indexes hold about a dozen of them. The
index's SQL runs unchanged on both engines, so only the values differ: what a statement binds goes
through a ``*_key`` function (bytes in an index file; on PostgreSQL the text its schema has always
kept), and what a row gives back through :func:`hash_hex`, :func:`note_id`, :func:`version_id` or
:func:`actor` (bytes or text alike). An id made elsewhere (of another shape, or a service account's)
keeps its text in either.
"""

from __future__ import annotations

from typing import overload

from gitmem import ids
from gitmem.model import Actor


def hash_key(value: str | None, dialect: str) -> bytes | str | None:
    """A Git or SHA-256 hash, in hex, as the index keeps it."""
    return bytes.fromhex(value) if value is not None and dialect == "sqlite" else value


@overload
def hash_hex(value: bytes | str) -> str: ...
@overload
def hash_hex(value: None) -> None: ...
def hash_hex(value: bytes | str | None) -> str | None:
    """A hash as the index gives it back, in hex."""
    return value.hex() if isinstance(value, bytes) else value


def id_key(value: str | None, prefix: str, dialect: str) -> bytes | str | None:
    """An id of ``prefix`` (``mem``, ``memver``) as the index keeps it."""
    if value is None or dialect != "sqlite":
        return value
    data = ids.id_bytes(value, prefix)
    return value if data is None else data


def note_key(value: str | None, dialect: str) -> bytes | str | None:
    return id_key(value, ids.MEMORY, dialect)


def version_key(value: str | None, dialect: str) -> bytes | str | None:
    return id_key(value, ids.VERSION, dialect)


# The actors whose ids are made here, by kind: their ids, too, are kept as bytes.
_ACTOR_PREFIXES = {"api_actor": ids.API_KEY, "user_actor": ids.USER, "task_actor": ids.TASK}


def actor_key(actor: Actor | None, dialect: str) -> bytes | str | None:
    """The id of who made a change (``None``: the service) as the index keeps it."""
    return None if actor is None else actor_id_key(actor.type, actor.id, dialect)


def actor_id_key(kind: str, value: str, dialect: str) -> bytes | str | None:
    """The id of an actor of ``kind`` as the index keeps it."""
    prefix = _ACTOR_PREFIXES.get(kind)
    return id_key(value, prefix, dialect) if prefix else value


def actor(kind: str | None, value: bytes | str | None) -> Actor | None:
    """Who made a change, from the index's ``*_type`` and ``*_id`` columns."""
    if not kind or not value:
        return None
    text = ids.id_from_bytes(_ACTOR_PREFIXES[kind], value) if isinstance(value, bytes) else value
    return Actor(kind, text)  # type: ignore[arg-type]  # a kind the index was given


@overload
def id_text(value: bytes | str, prefix: str) -> str: ...
@overload
def id_text(value: None, prefix: str) -> None: ...
def id_text(value: bytes | str | None, prefix: str) -> str | None:
    """An id of ``prefix`` as the index gives it back, as text."""
    return ids.id_from_bytes(prefix, value) if isinstance(value, bytes) else value


def note_id(value: bytes | str) -> str:
    return id_text(value, ids.MEMORY)


def version_id(value: bytes | str) -> str:
    return id_text(value, ids.VERSION)


__all__ = [
    "actor",
    "actor_id_key",
    "actor_key",
    "hash_hex",
    "hash_key",
    "id_key",
    "id_text",
    "note_id",
    "note_key",
    "version_id",
    "version_key",
]
