"""A home's signing key, and the record of every public key it has had (docs/audit.md).

Every commit gitmem writes is signed with the home's Ed25519 key in Git's SSH format
(:mod:`gitmem.crypto.sshsig`, :mod:`gitmem.git.signing`). The key is kept like the master key: its text in
``GITMEM_SIGNING_KEY``, else a file named by ``GITMEM_SIGNING_KEY_FILE``, else ``$GITMEM_HOME/signing.key``
(an OpenSSH private key, mode 0600), made with the home. It never enters a store.

``$GITMEM_HOME/allowed_signers`` is Git's allowed-signers file (``gpg.ssh.allowedSignersFile``), and the
record of the home's keys, one line each::

    gitmem@localhost namespaces="git",valid-before="20261202140000Z" ssh-ed25519 AAAA... gitmem SHA256:...
    gitmem@localhost namespaces="git" ssh-ed25519 AAAA... gitmem SHA256:...

The key in use has no ``valid-before``; a rotation (:func:`rotate`) closes the old key's line at the
moment the new key took over, so old commits still verify (Git checks a signature against its commit's
committer time) and the old key signs nothing new that verifies. No ``valid-after``: a rewrite signs
old versions anew with the current key, at their own old times.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import fcntl
import logging
import math
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gitmem.crypto.master_key import _write_private_file
from gitmem.crypto.sshsig import BadSignature, PublicKey, SigningKey
from gitmem.errors import GitmemError

log = logging.getLogger(__name__)

SIGNING_KEY_ENV = "GITMEM_SIGNING_KEY"
SIGNING_KEY_FILE_ENV = "GITMEM_SIGNING_KEY_FILE"
SIGNING_KEY_FILENAME = "signing.key"
ALLOWED_SIGNERS_FILENAME = "allowed_signers"
PRINCIPAL = "gitmem@localhost"  # the committer of every gitmem commit
_TIME_FORMAT = "%Y%m%d%H%M%SZ"
_LINE = re.compile(r"^(?P<principal>\S+)\s+(?P<options>\S+)\s+(?P<key>ssh-ed25519\s+\S+)")


class SigningKeyError(GitmemError):
    """A signing key that is missing, unreadable or not an Ed25519 key: nothing is signed with it, and a
    program stops at start rather than write unsigned commits."""


def parse_key_text(text: bytes) -> SigningKey:
    """An OpenSSH private key (``ssh-keygen -t ed25519 -N ''``), or the hex or base64 of its 32-byte seed."""
    stripped = text.strip()
    if stripped.startswith(b"-----BEGIN"):
        try:
            return SigningKey.from_text(stripped)
        except BadSignature as exc:
            raise SigningKeyError(exc.message) from None
    compact = b"".join(stripped.split()).decode("ascii", errors="replace")
    try:
        seed = bytes.fromhex(compact) if re.fullmatch(r"[0-9a-fA-F]{64}", compact) else base64.b64decode(compact)
    except (binascii.Error, ValueError):
        seed = b""
    if len(seed) != 32:
        raise SigningKeyError("a signing key is an OpenSSH Ed25519 private key, or 32 bytes as hex or base64")
    return SigningKey.from_private(Ed25519PrivateKey.from_private_bytes(seed))


def check_signing_key_text(text: str) -> None:
    """Raise ``ValueError`` (a settings error) unless ``text`` is a usable signing key."""
    try:
        parse_key_text(text.encode())
    except SigningKeyError as exc:
        raise ValueError(exc.message) from None


def check_signing_key_file(path: Path) -> None:
    """Raise ``ValueError`` (a settings error) unless ``path`` holds a usable signing key."""
    try:
        parse_key_text(path.read_bytes())
    except OSError as exc:
        raise ValueError(f"cannot read it ({exc.strerror or exc})") from None
    except SigningKeyError as exc:
        raise ValueError(exc.message) from None


@dataclass(frozen=True)
class SigningKeySource:
    """Where a home's signing key comes from: its text (``GITMEM_SIGNING_KEY``), else a file
    (``GITMEM_SIGNING_KEY_FILE``), else the home's own ``signing.key``."""

    text: str | None = field(default=None, repr=False)
    file: Path | None = None

    def path(self, home: Path) -> Path | None:
        """The file the key is read from (None: from the environment)."""
        if self.text is not None:
            return None
        return self.file if self.file is not None else home / SIGNING_KEY_FILENAME


@dataclass(frozen=True)
class KnownKey:
    """One line of the allowed-signers file: a key the home signed with, and until when."""

    key: PublicKey
    valid_before: dt.datetime | None = None

    def valid_at(self, seconds: int) -> bool:
        """Whether the key may have signed a commit with this committer time (as ``ssh-keygen`` judges)."""
        return self.valid_before is None or seconds <= int(self.valid_before.timestamp())

    def line(self) -> str:
        options = 'namespaces="git"'
        if self.valid_before is not None:
            options += f',valid-before="{self.valid_before.strftime(_TIME_FORMAT)}"'
        return f"{PRINCIPAL} {options} {self.key.openssh} gitmem {self.key.fingerprint}\n"


def parse_allowed_signers(text: str) -> list[KnownKey]:
    """The keys of an allowed-signers file gitmem wrote (other lines are skipped)."""
    keys: list[KnownKey] = []
    for raw in text.splitlines():
        match = _LINE.match(raw.strip())
        if match is None or match["principal"] != PRINCIPAL:
            continue
        before = re.search(r'valid-before="(\d{14})Z?"', match["options"])
        when = dt.datetime.strptime(before[1], "%Y%m%d%H%M%S").replace(tzinfo=dt.UTC) if before else None
        try:
            keys.append(KnownKey(PublicKey.from_openssh(match["key"]), when))
        except BadSignature:
            continue
    return keys


def allowed_signers_path(home: Path) -> Path:
    return home / ALLOWED_SIGNERS_FILENAME


def known_keys(home: Path) -> list[KnownKey]:
    """Every key the home has signed with (oldest first)."""
    try:
        return parse_allowed_signers(allowed_signers_path(home).read_text())
    except FileNotFoundError:
        return []


@contextlib.contextmanager
def _locked(home: Path):  # type: ignore[no-untyped-def]
    fd = os.open(home / ".allowed_signers.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write_allowed(home: Path, keys: list[KnownKey]) -> None:
    path = allowed_signers_path(home)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with open(tmp, "w") as handle:
        handle.write("".join(k.line() for k in keys))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def record_key(home: Path, key: PublicKey) -> None:
    """Add ``key`` to the allowed-signers file unless it is there."""
    if any(k.key == key for k in known_keys(home)):
        return
    with _locked(home):
        keys = known_keys(home)
        if not any(k.key == key for k in keys):
            _write_allowed(home, [*keys, KnownKey(key)])
            log.info("signing key %s recorded in %s", key.fingerprint, allowed_signers_path(home))


def load_signing_key(home: Path, source: SigningKeySource) -> SigningKey:
    """The key ``source`` names; else ``home/signing.key``, made (0600) when the home is new."""
    if source.text is not None:
        return parse_key_text(source.text.encode())
    path = source.path(home)
    assert path is not None  # noqa: S101  narrows the type for mypy; never a check of input
    made = source.file is None and not path.exists() and _write_private_file(path, SigningKey.generate().to_text())
    if made:
        log.info("generated a new signing key at %s; back it up with the master key", path)
    try:
        return parse_key_text(path.read_bytes())
    except OSError as exc:
        raise SigningKeyError(f"cannot read the signing key {path} ({exc.strerror or exc})") from None


class HomeSigner:
    """Signs with the home's key, read again when its file changes (a rotation by another process), so a
    running server never signs with a key that has been closed."""

    def __init__(self, home: Path, source: SigningKeySource | None = None) -> None:
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        self.source = source or SigningKeySource()
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._key = self._load()

    def _file_stamp(self) -> tuple[int, int, int] | None:
        path = self.source.path(self.home)
        if path is None:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return self._stamp  # gone for a moment (a rename): keep the key we have
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _load(self) -> SigningKey:
        key = load_signing_key(self.home, self.source)
        self._stamp = self._file_stamp()
        record_key(self.home, key.public)
        return key

    @property
    def key(self) -> SigningKey:
        if self._file_stamp() != self._stamp:
            with self._lock:
                if self._file_stamp() != self._stamp:
                    self._key = self._load()
        return self._key

    @property
    def public(self) -> PublicKey:
        return self.key.public

    def sign(self, payload: bytes) -> bytes:
        """The armored signature of a commit's bytes (namespace ``git``)."""
        return self.key.sign(payload, "git")

    def sign_as(self, payload: bytes, namespace: str) -> bytes:
        """The armored signature of other bytes than a commit's (an erasure receipt's), in ``namespace``."""
        return self.key.sign(payload, namespace)

    def allowed_signers(self) -> str:
        """The allowed-signers file a clone verifies with."""
        return allowed_signers_path(self.home).read_text()


def rotate(home: Path, source: SigningKeySource, now: dt.datetime) -> tuple[PublicKey, PublicKey]:
    """Make a new signing key, put it where the key is read from, and close the old one's line at this
    moment (``valid-before``). Returns the old and the new public key."""
    path = source.path(home)
    if path is None:
        raise SigningKeyError(
            f"the signing key comes from ${SIGNING_KEY_ENV}: put a new key there (its public key is recorded"
            " when a program starts with it) and close the old one's line in allowed_signers by hand"
        )
    old = load_signing_key(home, source)
    new = SigningKey.generate()
    record_key(home, old.public)
    record_key(home, new.public)
    staged = path.with_name(path.name + ".new")
    staged.unlink(missing_ok=True)
    _write_private_file(staged, new.to_text())
    os.replace(staged, path)
    # After the new key is in place: whatever the old key signed carries a time before this second.
    closed = dt.datetime.fromtimestamp(math.ceil(now.timestamp()), dt.UTC)
    with _locked(home):
        keys = [
            KnownKey(k.key, closed) if k.key == old.public and k.valid_before is None else k for k in known_keys(home)
        ]
        _write_allowed(home, keys)
    log.warning("signing key rotated: %s closed, %s signs from now on", old.public.fingerprint, new.public.fingerprint)
    return old.public, new.public


__all__ = [
    "ALLOWED_SIGNERS_FILENAME",
    "PRINCIPAL",
    "HomeSigner",
    "KnownKey",
    "SigningKeyError",
    "SigningKeySource",
    "known_keys",
    "load_signing_key",
    "parse_allowed_signers",
    "rotate",
]
