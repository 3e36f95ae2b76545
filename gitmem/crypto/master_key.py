"""Encryption at rest: a master key, per-owner data keys, and a deterministic content codec.

- The master key lives outside every repository (env, a key file, or ``$GITMEM_HOME/master.key``).
- Each owner (a user, profile or store id) has 64-byte AES-SIV data keys, stored only wrapped by the
  master key (AES-GCM, owner id as associated data) in a :class:`KeyRing` file.
- :mod:`gitmem.crypto.codec` turns note content into blobs (deterministic AES-SIV) and back;
  :mod:`gitmem.crypto.keyring` keeps each owner's wrapped data keys.

What stays visible in a repository: paths (also repeated in each blob's header), sizes (ciphertext is
plaintext + 16 bytes + header), times, authors and commit messages.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import logging
import os
import re
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from gitmem.durable import fsync_dir
from gitmem.errors import GitmemError

log = logging.getLogger(__name__)

MASTER_KEY_ENV = "GITMEM_MASTER_KEY"
MASTER_KEY_FILE_ENV = "GITMEM_MASTER_KEY_FILE"
MASTER_KEY_FILENAME = "master.key"
MIN_MASTER_KEY_BYTES = 32
DATA_KEY_BYTES = 64  # AES-SIV with two AES-256 halves

_WRAP_VERSION = b"GMW1"
_WRAP_INFO = b"gitmem master key -> data key wrapping v1"
_WRAP_AAD = b"gitmem-wrap-v1\x00"
_NONCE_BYTES = 12


class DecryptionFailed(GitmemError):
    """A blob or wrapped key that the given key cannot open: wrong key, wrong owner/path, or tampering."""


class KeyMissing(GitmemError):
    """No usable data key: the owner never had one, or it was destroyed."""


class InvalidKey(GitmemError):
    """Key material that cannot be parsed (bad encoding or too short)."""


def _key_id(domain: bytes, key: bytes) -> str:
    # A short, non-secret fingerprint so rotation can tell key generations apart.
    return hashlib.sha256(domain + b"\x00" + key).hexdigest()[:12]


def _decode_key_text(text: str) -> bytes:
    """Hex or (urlsafe-)base64, padding optional. Hex wins when the text is all hex digits."""
    text = "".join(text.split())
    if not text:
        raise InvalidKey("empty key")
    if len(text) % 2 == 0 and re.fullmatch(r"[0-9a-fA-F]+", text):
        return bytes.fromhex(text)
    padded = text + "=" * (-len(text) % 4)
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidKey("key is neither hex nor base64") from exc


# --- data keys ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataKey:
    """A 64-byte AES-SIV key. Never logged: the bytes are kept out of ``repr``."""

    material: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.material) != DATA_KEY_BYTES:
            raise InvalidKey(f"a data key has {DATA_KEY_BYTES} bytes, not {len(self.material)}")

    @property
    def key_id(self) -> str:
        return _key_id(b"gitmem data key", self.material)

    @classmethod
    def generate(cls) -> DataKey:
        return cls(AESSIV.generate_key(DATA_KEY_BYTES * 8))


def export_key(data_key: DataKey) -> str:
    """The text a person passes to ``gitmem clone --key`` (standard base64 of the 64 key bytes)."""
    return base64.b64encode(data_key.material).decode("ascii")


def import_key(text: str) -> DataKey:
    material = _decode_key_text(text)
    if len(material) != DATA_KEY_BYTES:
        raise InvalidKey(f"an exported data key has {DATA_KEY_BYTES} bytes, not {len(material)}")
    return DataKey(material)


# --- master key -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MasterKey:
    """The key that wraps every data key. It never enters a repository."""

    material: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.material) < MIN_MASTER_KEY_BYTES:
            raise InvalidKey(f"the master key needs at least {MIN_MASTER_KEY_BYTES} bytes")

    @property
    def key_id(self) -> str:
        return _key_id(b"gitmem master key", self.material)

    def _aead(self) -> AESGCM:
        # HKDF so a master key of any length >= 32 bytes yields a proper AES-256 key, bound to this use.
        wrap_key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_WRAP_INFO).derive(self.material)
        return AESGCM(wrap_key)

    def wrap(self, owner_id: str, data_key: DataKey) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._aead().encrypt(nonce, data_key.material, _WRAP_AAD + owner_id.encode("utf-8"))
        return _WRAP_VERSION + nonce + sealed

    def unwrap(self, owner_id: str, wrapped: bytes) -> DataKey:
        """Open a wrapped key; a different owner id, master key or any flipped bit fails."""
        head = len(_WRAP_VERSION)
        if not wrapped.startswith(_WRAP_VERSION) or len(wrapped) < head + _NONCE_BYTES + 16:
            raise DecryptionFailed("not a wrapped gitmem data key", owner_id=owner_id)
        nonce, sealed = wrapped[head : head + _NONCE_BYTES], wrapped[head + _NONCE_BYTES :]
        try:
            material = self._aead().decrypt(nonce, sealed, _WRAP_AAD + owner_id.encode("utf-8"))
        except InvalidTag as exc:
            raise DecryptionFailed("cannot unwrap the data key", owner_id=owner_id) from exc
        return DataKey(material)

    def new_data_key(self, owner_id: str) -> tuple[DataKey, bytes]:
        data_key = DataKey.generate()
        return data_key, self.wrap(owner_id, data_key)


def _read_key_file(path: Path) -> bytes:
    raw = path.read_bytes()
    try:
        return _decode_key_text(raw.decode("ascii"))
    except (UnicodeDecodeError, InvalidKey):
        return raw  # a raw binary key file


def _write_private_file(path: Path, data: bytes) -> bool:
    """Create ``path`` with mode 0600 holding ``data``, atomically; False when it already exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mkstemp creates it 0600
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        try:
            os.link(tmp, path)  # fails if another process won the race: then we use its key
        except FileExistsError:
            return False
        fsync_dir(path.parent)
        return True
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def check_master_key_text(text: str) -> None:
    """Raise ``ValueError`` (a settings error) unless ``text`` is a usable master key."""
    try:
        MasterKey(_decode_key_text(text))
    except InvalidKey as exc:
        raise ValueError(exc.message) from None


def check_master_key_file(path: Path) -> None:
    """Raise ``ValueError`` (a settings error) unless ``path`` holds a usable master key."""
    try:
        MasterKey(_read_key_file(path))
    except OSError as exc:
        raise ValueError(f"cannot read it ({exc.strerror or exc})") from None
    except InvalidKey as exc:
        raise ValueError(exc.message) from None


@dataclass(frozen=True)
class MasterKeySource:
    """Where a home's master key comes from: a key's text (``GITMEM_MASTER_KEY``), else a file
    (``GITMEM_MASTER_KEY_FILE``), else the home's own ``master.key``."""

    text: str | None = field(default=None, repr=False)
    file: Path | None = None

    @property
    def in_home(self) -> bool:
        return self.text is None and self.file is None


def load_master_key(home: Path, source: MasterKeySource | None = None) -> MasterKey:
    """The key ``source`` names; else ``home/master.key``, generated (0600) on first use."""
    source = source or MasterKeySource()
    if source.text is not None:
        log.info("master key taken from $%s", MASTER_KEY_ENV)
        return MasterKey(_decode_key_text(source.text))
    if source.file is not None:
        log.info("master key read from %s", source.file)
        return MasterKey(_read_key_file(source.file))
    path = Path(home) / MASTER_KEY_FILENAME
    if not path.exists():
        encoded = base64.urlsafe_b64encode(secrets.token_bytes(32)) + b"\n"
        if _write_private_file(path, encoded):
            log.warning("generated a new master key at %s; back it up, without it nothing decrypts", path)
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        log.warning("master key file %s is readable by others (mode %o); chmod 600 it", path, mode)
    return MasterKey(_read_key_file(path))
