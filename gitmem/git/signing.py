"""Signed commits: Git's ``gpgsig`` header holding an SSH signature of the commit's other bytes.

What Git signs (``git commit -S`` with ``gpg.format=ssh``) is the commit object without its ``gpgsig``
header; the signature, an armored ``sshsig`` blob of namespace ``git``
(:mod:`gitmem.crypto.sshsig`), goes in as the last header, its lines after the first indented by one
space. :func:`signed` does exactly that to the bytes gitmem made, in-process, so stock
``git verify-commit`` accepts it; :func:`split` takes a commit apart again for checking.

A :class:`Signer` is the home's key (:class:`gitmem.crypto.signing_key.HomeSigner`); ``None`` writes
unsigned commits (a store opened as a bare library object, without a home).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

import pygit2

from gitmem.git.pack.format import PackObject
from gitmem.git.trees import object_id

HEADER = b"gpgsig"


class Signer(Protocol):
    def sign(self, payload: bytes) -> bytes:
        """The armored signature of ``payload``."""
        ...


def signed(body: bytes, signer: Signer | None) -> bytes:
    """A commit's bytes with ``signer``'s ``gpgsig`` header added (as they are, without a signer)."""
    if signer is None:
        return body
    end = body.index(b"\n\n")
    armored = signer.sign(body).rstrip(b"\n")
    header = HEADER + b" " + armored.replace(b"\n", b"\n ")
    return body[:end] + b"\n" + header + body[end:]


def signed_commit(body: bytes, signer: Signer | None) -> PackObject:
    """A commit object, signed, ready for a pack."""
    data = signed(body, signer)
    return PackObject(b"commit", data, object_id(b"commit", data))


def split(raw: bytes) -> tuple[bytes, bytes | None]:
    """A commit's bytes as what was signed and the armored signature (None when unsigned)."""
    end = raw.find(b"\n\n")
    head, rest = (raw[:end], raw[end:]) if end >= 0 else (raw, b"")
    lines = head.split(b"\n")
    kept: list[bytes] = []
    signature: list[bytes] | None = None
    inside = False
    for line in lines:
        if inside and line.startswith(b" "):
            assert signature is not None  # noqa: S101  narrows the type for mypy; never a check of input
            signature.append(line[1:])
            continue
        inside = False
        if signature is None and line.startswith(HEADER + b" "):
            signature = [line[len(HEADER) + 1 :]]
            inside = True
            continue
        kept.append(line)
    if signature is None:
        return raw, None
    return b"\n".join(kept) + rest, b"\n".join(signature) + b"\n"


def write_commit(
    repo: pygit2.Repository,
    signer: Signer | None,
    *,
    author: pygit2.Signature,
    committer: pygit2.Signature,
    message: str,
    tree: pygit2.Oid,
    parents: Sequence[pygit2.Oid],
) -> pygit2.Oid:
    """Write one (signed) commit object with libgit2, moving no ref (the few commits not in a pack:
    review marks, push records)."""
    if signer is None:
        return repo.create_commit(None, author, committer, message, tree, list(parents))
    # pygit2's stubs type the buffer as an Oid; it is the commit's text.
    content = cast(object, repo.create_commit_string(author, committer, message, tree, list(parents)))
    body = content.encode() if isinstance(content, str) else bytes(cast(bytes, content))
    signature = signer.sign(body).decode()
    return repo.create_commit_with_signature(body.decode(), signature.rstrip("\n"))


def sign_chain(repo: pygit2.Repository, base: str | None, tip: str, signer: Signer) -> tuple[str, list[PackObject]]:
    """Sign anew the line of commits after ``base`` (exclusive; the root if None) up to ``tip``, each
    onto its signed parent: the new tip and the commits to pack (what ``git fast-import``, which signs
    nothing, wrote for a rewrite). The unsigned line is left unreferenced, for the purge."""
    line: list[bytes] = []
    current: str | None = tip
    while current is not None and current != base:
        raw = repo[current].read_raw()
        line.append(raw)
        parents = [ln[7:].decode() for ln in raw.split(b"\n\n", 1)[0].split(b"\n") if ln.startswith(b"parent ")]
        current = parents[0] if parents else None
    renamed: dict[bytes, bytes] = {}
    objects: list[PackObject] = []
    new_tip = tip
    for raw in reversed(line):
        old_id = object_id(b"commit", raw).hex().encode()
        head, sep, message = raw.partition(b"\n\n")
        lines = [
            b"parent " + renamed.get(ln[7:], ln[7:]) if ln.startswith(b"parent ") else ln
            for ln in split(head + sep)[0].rstrip(b"\n").split(b"\n")
        ]
        commit = signed_commit(b"\n".join(lines) + sep + message, signer)
        renamed[old_id] = commit.oid.hex().encode()
        objects.append(commit)
        new_tip = commit.oid.hex()
    return new_tip, objects


__all__ = ["HEADER", "Signer", "sign_chain", "signed", "signed_commit", "split", "write_commit"]
