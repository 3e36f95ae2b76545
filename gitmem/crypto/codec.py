"""The content codecs: what the engine calls around every blob write and read.

:class:`SivCodec` turns note content into blobs with deterministic AES-SIV, associated data =
[store id, path], so equal content at the same path gives an equal blob and no-op writes stay no-ops.

Blob format (ASCII header, then the raw AES-SIV output, i.e. 16-byte tag followed by the ciphertext)::

    GITMEM-SIV1 <key id> <percent-quoted path>\\n<siv output>

The path in the header is a hint only (Git's textconv gets a temporary file, not the path); the
authoritative path is always the caller's, checked by the AEAD.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from gitmem.crypto.master_key import DataKey, DecryptionFailed

MAGIC = b"GITMEM-SIV1 "
_MAX_HEADER = 4096  # a header never exceeds this: key id + a quoted path of <= 1,024 UTF-8 bytes
_KEY_ID_RE = re.compile(r"^[0-9a-f]{12}$")


@runtime_checkable
class ContentCodec(Protocol):
    """What the engine calls around every blob write (encode) and read (decode)."""

    def encode(self, path: str, plaintext: bytes) -> bytes: ...

    def decode(self, path: str, blob: bytes) -> bytes: ...


class PlainCodec:
    """The identity codec, for stores without encryption."""

    def encode(self, path: str, plaintext: bytes) -> bytes:  # noqa: ARG002  the ContentCodec protocol's signature
        return plaintext

    def decode(self, path: str, blob: bytes) -> bytes:  # noqa: ARG002  the ContentCodec protocol's signature
        return blob


@dataclass(frozen=True)
class BlobHeader:
    key_id: str
    path: str  # a hint: the path the blob was written for
    body_offset: int


def canonical_path(path: str) -> str:
    """The path as Git's tree spells it: ``/people/sam.md`` and ``people/sam.md`` bind the same."""
    return path[1:] if path.startswith("/") else path


def parse_header(blob: bytes) -> BlobHeader | None:
    """The header of an encrypted blob, or None when ``blob`` does not carry the magic."""
    if not blob.startswith(MAGIC):
        return None
    end = blob.find(b"\n", 0, _MAX_HEADER)
    if end < 0:
        return None
    try:
        fields = blob[len(MAGIC) : end].decode("ascii").split(" ")
    except UnicodeDecodeError:
        return None
    if len(fields) != 2 or not _KEY_ID_RE.match(fields[0]):
        return None
    return BlobHeader(key_id=fields[0], path=urllib.parse.unquote(fields[1]), body_offset=end + 1)


def is_encrypted(blob: bytes) -> bool:
    return parse_header(blob) is not None


class SivCodec:
    """Deterministic AES-SIV with associated data [store id, path].

    Encodes with ``data_key``; decodes with whichever of ``data_key`` and ``old_keys`` the blob's key
    id names, so blobs from before a rotation stay readable until their key is destroyed.
    """

    def __init__(self, data_key: DataKey, store_id: str, *, old_keys: Iterable[DataKey] = ()) -> None:
        self.data_key = data_key
        self.store_id = store_id
        self._keys = {k.key_id: k for k in old_keys}
        self._keys[data_key.key_id] = data_key
        self._ciphers: dict[str, AESSIV] = {}

    @property
    def key_id(self) -> str:
        return self.data_key.key_id

    def _cipher(self, key_id: str) -> AESSIV:
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            cipher = self._ciphers[key_id] = AESSIV(self._keys[key_id].material)
        return cipher

    def _aad(self, path: str) -> list[bytes]:
        return [self.store_id.encode("utf-8"), canonical_path(path).encode("utf-8")]

    def encode(self, path: str, plaintext: bytes) -> bytes:
        quoted = urllib.parse.quote(canonical_path(path), safe="/")
        header = MAGIC + f"{self.key_id} {quoted}\n".encode("ascii")
        return header + self._cipher(self.key_id).encrypt(plaintext, self._aad(path))

    def decode(self, path: str, blob: bytes) -> bytes:
        header = parse_header(blob)
        if header is None:
            raise DecryptionFailed("not a gitmem-encrypted blob", path=path)
        if header.key_id not in self._keys:
            raise DecryptionFailed(
                "blob was encrypted with a key that is not available", path=path, key_id=header.key_id
            )
        try:
            return self._cipher(header.key_id).decrypt(blob[header.body_offset :], self._aad(path))
        except InvalidTag as exc:
            raise DecryptionFailed(
                "blob does not authenticate (tampered, moved or wrong store)", path=path, key_id=header.key_id
            ) from exc

    def decode_any_path(self, blob: bytes) -> bytes:
        """Decode with the path named in the blob's own header: for display (textconv) only."""
        header = parse_header(blob)
        if header is None:
            raise DecryptionFailed("not a gitmem-encrypted blob")
        return self.decode(header.path, blob)
