"""Ed25519 signatures in OpenSSH's ``sshsig`` format, the one Git's ``gpg.format=ssh`` reads.

A signature (OpenSSH's PROTOCOL.sshsig) is the armored blob::

    -----BEGIN SSH SIGNATURE-----
    base64 of: "SSHSIG" u32(1) string(public key) string(namespace) string("") string("sha512")
               string(string("ssh-ed25519") string(64-byte signature))
    -----END SSH SIGNATURE-----

where the Ed25519 signature is over ``"SSHSIG" string(namespace) string("") string("sha512")
string(SHA-512(message))``. Git signs commits with namespace ``git``; ``ssh-keygen -Y verify`` and so
``git verify-commit`` accept what :func:`sign` makes. Everything is in-process (``cryptography``): no
``ssh-keygen`` per signature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from gitmem.errors import GitmemError

MAGIC = b"SSHSIG"
KEY_TYPE = b"ssh-ed25519"
HASH = b"sha512"
BEGIN = "-----BEGIN SSH SIGNATURE-----"
END = "-----END SSH SIGNATURE-----"
LINE = 70  # ssh-keygen wraps the armor at 70 columns


class BadSignature(GitmemError):
    """A signature that is malformed, by another key, for another namespace, or over other bytes."""


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _read_string(data: bytes, at: int) -> tuple[bytes, int]:
    if at + 4 > len(data):
        raise BadSignature("the signature is truncated")
    (size,) = struct.unpack_from(">I", data, at)
    end = at + 4 + size
    if end > len(data):
        raise BadSignature("the signature is truncated")
    return data[at + 4 : end], end


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key (its 32 bytes)."""

    raw: bytes

    @property
    def blob(self) -> bytes:
        """The key as SSH's wire encodes it."""
        return _string(KEY_TYPE) + _string(self.raw)

    @property
    def openssh(self) -> str:
        """``ssh-ed25519 AAAA...``: the form of ``authorized_keys`` and allowed-signers files."""
        return f"{KEY_TYPE.decode()} {base64.b64encode(self.blob).decode()}"

    @property
    def fingerprint(self) -> str:
        """``SHA256:...``, as ``ssh-keygen -l`` prints it."""
        digest = base64.b64encode(hashlib.sha256(self.blob).digest()).decode().rstrip("=")
        return f"SHA256:{digest}"

    @classmethod
    def from_openssh(cls, text: str) -> PublicKey:
        parts = text.split()
        if len(parts) < 2 or parts[0] != KEY_TYPE.decode():
            raise BadSignature("not an ssh-ed25519 public key")
        try:
            blob = base64.b64decode(parts[1], validate=True)
        except (binascii.Error, ValueError):
            raise BadSignature("not an ssh-ed25519 public key") from None
        return cls.from_blob(blob)

    @classmethod
    def from_blob(cls, blob: bytes) -> PublicKey:
        kind, at = _read_string(blob, 0)
        raw, at = _read_string(blob, at)
        if kind != KEY_TYPE or len(raw) != 32 or at != len(blob):
            raise BadSignature("the signature's key is not an Ed25519 key")
        return cls(raw)

    def verify(self, signature: bytes, data: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, data)
            return True
        except InvalidSignature:
            return False


@dataclass(frozen=True)
class SigningKey:
    """An Ed25519 private key. Never logged: the key is kept out of ``repr``."""

    private: Ed25519PrivateKey = field(repr=False)
    public: PublicKey

    @classmethod
    def generate(cls) -> SigningKey:
        return cls.from_private(Ed25519PrivateKey.generate())

    @classmethod
    def from_private(cls, private: Ed25519PrivateKey) -> SigningKey:
        raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return cls(private, PublicKey(raw))

    @classmethod
    def from_text(cls, text: bytes) -> SigningKey:
        """An OpenSSH private key file's text (``ssh-keygen -t ed25519`` makes one, unencrypted)."""
        try:
            loaded = serialization.load_ssh_private_key(text.strip() + b"\n", password=None)
        except (ValueError, TypeError, binascii.Error) as exc:
            raise BadSignature(f"not an unencrypted OpenSSH private key ({exc})") from None
        if not isinstance(loaded, Ed25519PrivateKey):
            raise BadSignature("the signing key must be an Ed25519 key (ssh-keygen -t ed25519)")
        return cls.from_private(loaded)

    def to_text(self) -> bytes:
        """The key as an OpenSSH private key file (``ssh-keygen -y -f`` reads it)."""
        return self.private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )

    def sign(self, message: bytes, namespace: str = "git") -> bytes:
        """The armored ``sshsig`` signature of ``message`` (ends with a newline)."""
        ns = namespace.encode()
        signed = MAGIC + _string(ns) + _string(b"") + _string(HASH) + _string(hashlib.sha512(message).digest())
        raw = self.private.sign(signed)
        blob = (
            MAGIC
            + struct.pack(">I", 1)
            + _string(self.public.blob)
            + _string(ns)
            + _string(b"")
            + _string(HASH)
            + _string(_string(KEY_TYPE) + _string(raw))
        )
        text = base64.b64encode(blob).decode()
        lines = [text[i : i + LINE] for i in range(0, len(text), LINE)]
        return ("\n".join([BEGIN, *lines, END]) + "\n").encode()


@dataclass(frozen=True)
class Signature:
    """A parsed ``sshsig`` signature: the key that claims it, its namespace, the raw signature."""

    key: PublicKey
    namespace: str
    hash_algorithm: bytes
    raw: bytes

    def verify(self, message: bytes, namespace: str = "git") -> bool:
        """Whether this signs ``message`` in ``namespace`` with :attr:`key` (the caller says whether
        the key is one it trusts)."""
        if self.namespace != namespace or self.hash_algorithm not in (b"sha512", b"sha256"):
            return False
        digest = hashlib.new(self.hash_algorithm.decode(), message).digest()
        signed = MAGIC + _string(namespace.encode()) + _string(b"") + _string(self.hash_algorithm) + _string(digest)
        return self.key.verify(self.raw, signed)


def parse(armored: bytes) -> Signature:
    """The signature in an armored ``sshsig`` blob; :class:`BadSignature` if it is none."""
    text = armored.decode("ascii", errors="replace").strip()
    if not text.startswith(BEGIN) or not text.endswith(END):
        raise BadSignature("not an SSH signature")
    body = "".join(text[len(BEGIN) : -len(END)].split())
    try:
        blob = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise BadSignature("the SSH signature is not base64") from None
    if not blob.startswith(MAGIC) or blob[6:10] != struct.pack(">I", 1):
        raise BadSignature("not a version 1 SSH signature")
    key_blob, at = _read_string(blob, 10)
    namespace, at = _read_string(blob, at)
    _reserved, at = _read_string(blob, at)
    hash_algorithm, at = _read_string(blob, at)
    inner, at = _read_string(blob, at)
    kind, inner_at = _read_string(inner, 0)
    raw, _ = _read_string(inner, inner_at)
    if kind != KEY_TYPE or len(raw) != 64:
        raise BadSignature("not an Ed25519 SSH signature")
    return Signature(PublicKey.from_blob(key_blob), namespace.decode(errors="replace"), hash_algorithm, raw)


__all__ = ["BadSignature", "PublicKey", "Signature", "SigningKey", "parse"]
