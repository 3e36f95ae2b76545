"""Page tokens: the one codec for every listing's ``next_page`` / ``?page=``.

A token is ``base64url(JSON [kind, *parts]) . base64url(HMAC-SHA256(key, payload)[:16])``. It is
signed so that any token the server did not hand out is refused with a 400 before its content is
looked at: a forged or edited token can neither reach SQLite with an out-of-range integer nor seek a
listing to a place the server never pointed at, and a token of one listing (``versions``) is not
accepted by another (``notes``). The key is 32 random bytes in a file next to the data the listing
reads (``$GITMEM_HOME/page-token.key`` for the catalog's listings, ``<store>.git/gitmem/page-token.key``
for a store's notes and versions), so every process serving that data shares it. It is made when the
first token is signed, not when the data is opened: a store never listed past one page has none (a
4 KiB block less at rest, issue 27), and a token shown to it is refused as one it never issued.
Losing the file only invalidates tokens in flight (the client starts the listing again).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import threading
import weakref
from pathlib import Path
from typing import Any

from gitmem.errors import InvalidRequest

KEY_FILE = "page-token.key"
MAX_INT = 2**63 - 1  # SQLite's integers
_MAC_BYTES = 16
_MAX_TOKEN_CHARS = 4096

# Weakly: each holder (a store's index, a home) keeps its own, so a closed store leaves nothing here.
_cache: weakref.WeakValueDictionary[Path, PageTokens] = weakref.WeakValueDictionary()
_cache_lock = threading.Lock()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class PageTokens:
    """Signs and checks page tokens with one key: ``key``, or the one in the file ``path`` (read, or
    made, when first needed)."""

    def __init__(self, key: bytes | None = None, *, path: Path | None = None) -> None:
        if key is None and path is None:
            raise ValueError("a page-token codec needs its key or the file it is kept in")
        self._key = key
        self._path = path
        self._lock = threading.Lock()

    def _key_of(self, *, make: bool) -> bytes | None:
        if self._key is None and self._path is not None:
            with self._lock:
                if self._key is None:
                    self._key = _load_or_create_key(self._path) if make else _load_key(self._path)
        return self._key

    def _signing_key(self) -> bytes:
        key = self._key_of(make=True)
        if key is None:  # unreachable: a codec has its key or its file (see __init__)
            raise ValueError("no page-token key")
        return key

    def _mac(self, payload: bytes, key: bytes) -> bytes:
        return hmac.new(key, payload, hashlib.sha256).digest()[:_MAC_BYTES]

    def encode(self, kind: str, *parts: int | str) -> str:
        payload = json.dumps([kind, *parts], separators=(",", ":")).encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload, self._signing_key()))}"

    def decode(self, token: object, kind: str, *types: type) -> list[Any]:
        """The parts of a token this key signed for ``kind``, checked against ``types``; anything
        else is :class:`InvalidRequest`."""
        if not isinstance(token, str) or len(token) > _MAX_TOKEN_CHARS or not token.isascii():
            raise InvalidRequest("invalid page token")
        payload_text, _, mac_text = token.partition(".")
        try:
            payload, mac = _unb64(payload_text), _unb64(mac_text)
        except (ValueError, binascii.Error):
            raise InvalidRequest("invalid page token") from None
        key = self._key_of(make=False)  # no key yet: no token was ever signed here
        if key is None or not hmac.compare_digest(mac, self._mac(payload, key)):
            raise InvalidRequest("invalid page token: it was not issued by this server")
        parts: list[Any]
        try:
            found_kind, *parts = json.loads(payload)
        except (ValueError, TypeError):
            raise InvalidRequest("invalid page token") from None
        if found_kind != kind:
            raise InvalidRequest("invalid page token: it belongs to another listing")
        # Signed tokens are ours; the shape is checked anyway so a changed encoder fails loudly as 400.
        if len(parts) != len(types) or not all(type(p) is t for p, t in zip(parts, types, strict=True)):
            raise InvalidRequest("invalid page token")
        if any(isinstance(p, int) and not 0 <= p <= MAX_INT for p in parts):
            raise InvalidRequest("invalid page token")
        return parts


def _load_key(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _load_or_create_key(path: Path) -> bytes:
    found = _load_key(path)
    if found is not None:
        return found
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, os.urandom(32))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # the first process to link wins; everyone then reads the same key
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_bytes()


def tokens_for(folder: Path) -> PageTokens:
    """The codec whose key lives in ``folder`` (made on first use, shared by every process), shared
    by its holders in this process while one keeps it."""
    path = (folder / KEY_FILE).resolve()
    with _cache_lock:
        found = _cache.get(path)
        if found is None:
            found = _cache[path] = PageTokens(path=path)
        return found
