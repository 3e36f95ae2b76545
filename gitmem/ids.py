"""Opaque, unique, roughly time-ordered ids such as ``mem_01JD...``.

A Crockford base32 ULID (48-bit milliseconds + 80 random bits) behind a type prefix. Ids derived
from content (versions of pushed commits) use :func:`derived_id` so that ``reindex`` finds the
same id again from history alone.
"""

from __future__ import annotations

import hashlib
import os
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

WORKSPACE = "wrkspc"
STORE = "memstore"
MEMORY = "mem"
VERSION = "memver"
API_KEY = "apikey"
USER = "user"
TASK = "task"
WORKER = "worker"
PROFILE = "profile"
DREAM = "drm"  # the SDK's prefix
DREAM_OLD = "dream"  # ids made before: still accepted on input
REQUEST = "req"


def _b32(value: int, length: int) -> str:
    out = []
    for _ in range(length):
        out.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


def new_id(prefix: str, *, now: float | None = None) -> str:
    millis = int((time.time() if now is None else now) * 1000) & ((1 << 48) - 1)
    rand = int.from_bytes(os.urandom(10), "big")
    return f"{prefix}_{_b32(millis, 10)}{_b32(rand, 16)}"


def derived_id(prefix: str, *parts: str) -> str:
    """A stable id from the given parts (e.g. a pushed commit and a path)."""
    digest = hashlib.sha256("\x00".join((prefix, *parts)).encode()).digest()
    return f"{prefix}_{_b32(int.from_bytes(digest[:16], 'big'), 26)}"


def has_prefix(value: str, prefix: str) -> bool:
    return value.startswith(prefix + "_") and len(value) > len(prefix) + 1


# The 16 bytes behind an id: every id made here is a prefix and 26 characters that spell a number
# below 2**128 (a ULID's 48 + 80 bits, or a digest's first 16 bytes), so an index file can keep those
# bytes (16) instead of the text (30 and more).
_NUMBER = str.maketrans(_ALPHABET, "0123456789ABCDEFGHIJKLMNOPQRSTUV")  # Crockford's digits as int()'s base 32
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]  # 10 bits a pair of digits: 13 pairs spell an id
_DIGITS = frozenset(_ALPHABET)


def id_bytes(value: str, prefix: str) -> bytes | None:
    """The 16 bytes of ``value`` if it is an id of ``prefix`` as this module makes them (upper case,
    26 characters, below 2**128), else ``None`` (an id made elsewhere keeps its text)."""
    body = value[len(prefix) + 1 :]
    if not value.startswith(prefix + "_") or len(body) != 26 or body[0] > "7" or not _DIGITS.issuperset(body):
        return None
    return int(body.translate(_NUMBER), 32).to_bytes(16, "big")


def id_from_bytes(prefix: str, data: bytes) -> str:
    """The id of ``prefix`` whose bytes (:func:`id_bytes`) are ``data``."""
    number = int.from_bytes(data, "big")
    return prefix + "_" + "".join([_PAIRS[(number >> shift) & 1023] for shift in range(120, -1, -10)])
