"""Encryption at rest: a master key, per-owner data keys, and a deterministic content codec.

- The master key lives outside every repository (env, a key file, or ``$GITMEM_HOME/master.key``).
- Each owner (a user, profile or store id) has 64-byte AES-SIV data keys, stored only wrapped by the
  master key (AES-GCM, owner id as associated data) in a :class:`KeyRing` file.
- :class:`SivCodec` turns note content into blobs with deterministic AES-SIV, associated data =
  [store id, path], so equal content at the same path gives an equal blob and no-op writes stay no-ops.

What stays visible in a repository: paths (also repeated in each blob's header), sizes (ciphertext is
plaintext + 16 bytes + header), times, authors and commit messages.

Blob format (ASCII header, then the raw AES-SIV output, i.e. 16-byte tag followed by the ciphertext)::

    GITMEM-SIV1 <key id> <percent-quoted path>\\n<siv output>

The path in the header is a hint only (Git's textconv gets a temporary file, not the path); the
authoritative path is always the caller's, checked by the AEAD.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import tempfile
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from gitmem.clock import Clock, iso, system_clock
from gitmem.durable import fsync_dir
from gitmem.errors import GitmemError
from gitmem.settings import GitmemSettings, load_settings

log = logging.getLogger(__name__)

MASTER_KEY_ENV = "GITMEM_MASTER_KEY"
MASTER_KEY_FILE_ENV = "GITMEM_MASTER_KEY_FILE"
MASTER_KEY_FILENAME = "master.key"
MIN_MASTER_KEY_BYTES = 32
DATA_KEY_BYTES = 64  # AES-SIV with two AES-256 halves

MAGIC = b"GITMEM-SIV1 "
_MAX_HEADER = 4096  # a header never exceeds this: key id + a quoted path of <= 1,024 UTF-8 bytes
_WRAP_VERSION = b"GMW1"
_WRAP_INFO = b"gitmem master key -> data key wrapping v1"
_WRAP_AAD = b"gitmem-wrap-v1\x00"
_NONCE_BYTES = 12
_KEY_ID_RE = re.compile(r"^[0-9a-f]{12}$")


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


def load_master_key(home: Path, settings: GitmemSettings | None = None) -> MasterKey:
    """From ``$GITMEM_MASTER_KEY``, else the file named by ``$GITMEM_MASTER_KEY_FILE``, else
    ``home/master.key``, generated (0600) on first use."""
    settings = settings or load_settings()
    if settings.MASTER_KEY is not None:
        log.info("master key taken from $%s", MASTER_KEY_ENV)
        return MasterKey(_decode_key_text(settings.MASTER_KEY.get_secret_value()))
    if settings.MASTER_KEY_FILE is not None:
        log.info("master key read from %s", settings.MASTER_KEY_FILE)
        return MasterKey(_read_key_file(settings.MASTER_KEY_FILE))
    path = Path(home) / MASTER_KEY_FILENAME
    if not path.exists():
        encoded = base64.urlsafe_b64encode(secrets.token_bytes(32)) + b"\n"
        if _write_private_file(path, encoded):
            log.warning("generated a new master key at %s; back it up, without it nothing decrypts", path)
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        log.warning("master key file %s is readable by others (mode %o); chmod 600 it", path, mode)
    return MasterKey(_read_key_file(path))


# --- content codecs -------------------------------------------------------------------------------


@runtime_checkable
class ContentCodec(Protocol):
    """What the engine calls around every blob write (encode) and read (decode)."""

    def encode(self, path: str, plaintext: bytes) -> bytes: ...

    def decode(self, path: str, blob: bytes) -> bytes: ...


class PlainCodec:
    """The identity codec, for stores without encryption."""

    def encode(self, path: str, plaintext: bytes) -> bytes:
        return plaintext

    def decode(self, path: str, blob: bytes) -> bytes:
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


# --- key ring -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyRecord:
    """One generation of an owner's data key, as stored (wrapped) in the key ring."""

    key_id: str
    wrapped: bytes = field(repr=False)
    created_at: str
    master_key_id: str

    def as_json(self) -> dict[str, str]:
        return {
            "key_id": self.key_id,
            "wrapped": base64.b64encode(self.wrapped).decode("ascii"),
            "created_at": self.created_at,
            "master_key_id": self.master_key_id,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KeyRecord:
        return cls(
            key_id=data["key_id"],
            wrapped=base64.b64decode(data["wrapped"]),
            created_at=data["created_at"],
            master_key_id=data.get("master_key_id", ""),
        )


class KeyRing:
    """Wrapped data keys by owner, in a small JSON file (mode 0600), newest generation last.

    Every call re-reads the file under an flock, so several processes (server workers, the CLI) can
    share it and a destroy in one is seen by all.
    """

    def __init__(self, path: Path, master: MasterKey, *, clock: Clock = system_clock) -> None:
        self.path = Path(path)
        self.master = master
        self.clock = clock

    # file handling

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _load(self) -> dict[str, list[KeyRecord]]:
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except FileNotFoundError:
            return {}
        return {owner: [KeyRecord.from_json(r) for r in recs] for owner, recs in data["owners"].items()}

    def _save(self, owners: dict[str, list[KeyRecord]], *, shred_old: bool = False) -> None:
        body = {"version": 1, "owners": {o: [r.as_json() for r in recs] for o, recs in owners.items()}}
        data = json.dumps(body, indent=1, sort_keys=True).encode("utf-8")
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        old_fd = -1
        try:
            os.write(fd, data)
            os.fsync(fd)
            if shred_old:
                with contextlib.suppress(FileNotFoundError):
                    old_fd = os.open(self.path, os.O_RDWR)
            os.replace(tmp, self.path)  # the new ring is in place before the old one is overwritten
            fsync_dir(self.path.parent)
            if old_fd >= 0:
                # Overwrite the replaced file's blocks (still open) so the destroyed wrapped keys are
                # not left behind in a free inode. Best effort: SSDs and CoW filesystems may keep copies.
                size = os.fstat(old_fd).st_size
                os.pwrite(old_fd, secrets.token_bytes(size), 0)
                os.fsync(old_fd)
                os.ftruncate(old_fd, 0)
        finally:
            os.close(fd)
            if old_fd >= 0:
                os.close(old_fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def _append(self, owners: dict[str, list[KeyRecord]], owner_id: str) -> DataKey:
        data_key, wrapped = self.master.new_data_key(owner_id)
        record = KeyRecord(data_key.key_id, wrapped, iso(self.clock()), self.master.key_id)
        owners.setdefault(owner_id, []).append(record)
        self._save(owners)
        log.info("new data key %s for %s", data_key.key_id, owner_id)
        return data_key

    # queries

    def records(self, owner_id: str) -> list[KeyRecord]:
        with self._locked():
            return list(self._load().get(owner_id, []))

    def has(self, owner_id: str) -> bool:
        return bool(self.records(owner_id))

    def current(self, owner_id: str) -> DataKey:
        """The newest data key of ``owner_id``; :class:`KeyMissing` if none (or destroyed)."""
        recs = self.records(owner_id)
        if not recs:
            raise KeyMissing("no data key for this owner", owner_id=owner_id)
        return self.master.unwrap(owner_id, recs[-1].wrapped)

    def keys(self, owner_id: str) -> list[DataKey]:
        """Every live generation, oldest first."""
        return [self.master.unwrap(owner_id, r.wrapped) for r in self.records(owner_id)]

    def key(self, owner_id: str, key_id: str) -> DataKey:
        for rec in self.records(owner_id):
            if rec.key_id == key_id:
                return self.master.unwrap(owner_id, rec.wrapped)
        raise KeyMissing("no such data key for this owner", owner_id=owner_id, key_id=key_id)

    def codec(self, owner_id: str, store_id: str) -> SivCodec:
        """A codec that writes with the current key and reads every live generation."""
        keys = self.keys(owner_id)
        if not keys:
            raise KeyMissing("no data key for this owner", owner_id=owner_id)
        return SivCodec(keys[-1], store_id, old_keys=keys[:-1])

    # changes

    def ensure(self, owner_id: str) -> DataKey:
        """The current key, created on first use."""
        with self._locked():
            owners = self._load()
            recs = owners.get(owner_id)
            if recs:
                return self.master.unwrap(owner_id, recs[-1].wrapped)
            return self._append(owners, owner_id)

    def rotate(self, owner_id: str) -> DataKey:
        """Add a new current generation. Old ones stay (old blobs still decode) until :meth:`retire`."""
        with self._locked():
            return self._append(self._load(), owner_id)

    def retire(self, owner_id: str, keep: Sequence[str]) -> None:
        """Destroy every generation whose key id is not in ``keep`` (after a re-encrypting rewrite)."""
        with self._locked():
            owners = self._load()
            recs = owners.get(owner_id, [])
            kept = [r for r in recs if r.key_id in keep]
            if len(kept) == len(recs):
                return
            if kept:
                owners[owner_id] = kept
            else:
                owners.pop(owner_id, None)
            self._save(owners, shred_old=True)
            log.info("retired %d data key(s) of %s", len(recs) - len(kept), owner_id)

    def rewrap(self, new_master: MasterKey) -> int:
        """Wrap every data key again under ``new_master`` (one atomic rewrite of the ring; the old file's
        blocks are overwritten). Every key is unwrapped first, so a ring this master cannot fully open
        is left as it was. Returns how many keys were re-wrapped."""
        with self._locked():
            owners = self._load()
            keys = {
                owner: [(rec, self.master.unwrap(owner, rec.wrapped)) for rec in recs] for owner, recs in owners.items()
            }
            rewrapped = {
                owner: [
                    replace(rec, wrapped=new_master.wrap(owner, key), master_key_id=new_master.key_id)
                    for rec, key in pairs
                ]
                for owner, pairs in keys.items()
            }
            self._save(rewrapped, shred_old=True)
            self.master = new_master
        count = sum(len(recs) for recs in rewrapped.values())
        log.info("re-wrapped %d data key(s) under master key %s", count, new_master.key_id)
        return count

    def destroy(self, owner_id: str) -> None:
        """Forget every key of ``owner_id``: overwrite and delete, so no old blob can be decrypted."""
        with self._locked():
            owners = self._load()
            if owners.pop(owner_id, None) is None:
                return
            self._save(owners, shred_old=True)
            log.info("destroyed every data key of %s", owner_id)
