"""Erasure receipts: what a redaction or a retention run deleted, and the proof that it is gone, signed with
the home's key so that anyone holding the public key alone can check it (docs/audit.md).

A receipt is one JSON document::

    {"receipt": {"type": "erasure_receipt", "format": 1, "memory_store_id": "memstore_...",
                 "kind": "redaction" | "retention", "version_ids": ["memver_..."],
                 "erased_by": "user_actor user_..." | "service", "erased_at": "...Z",
                 "reason": "...", "old_tip": "...", "new_tip": "...",
                 "entry_sha256": "<SHA-256 of the rewrite-log entry's entry.json>",
                 "blobs": [{"id": "<blob id>", "in_repository": false, "fetch_refused": true}],
                 "fetch_checked": 1, "public_key": "ssh-ed25519 AAAA..."},
     "signature": "-----BEGIN SSH SIGNATURE-----\\n..."}

``signature`` is an ``sshsig`` signature (namespace ``gitmem-receipt``) of the receipt's canonical JSON
(keys sorted, no spaces). Each deleted blob is checked twice: ``git cat-file`` finds it in no pack and
no loose object, and ``git fetch`` of the store by that id (raw upload-pack, no gitmem filter in front)
is refused. The receipt goes into the rewrite's log entry (``receipt.json``) beside ``entry.json``;
served, it also names that entry's commit (``rewrite_entry``, outside the signed part: its
``entry.json`` hashes to ``entry_sha256``).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from gitmem.crypto import sshsig
from gitmem.crypto.sshsig import BadSignature, PublicKey

NAMESPACE = "gitmem-receipt"
FORMAT = 1
FETCH_CHECKS = 50  # blobs whose fetch is tried, at most (a fetch is one git process)


@runtime_checkable
class ReceiptSigner(Protocol):
    def sign_as(self, payload: bytes, namespace: str) -> bytes: ...

    @property
    def public(self) -> PublicKey: ...


def canonical(receipt: dict[str, Any]) -> bytes:
    return json.dumps(receipt, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def entry_digest(entry_json: bytes) -> str:
    return hashlib.sha256(entry_json).hexdigest()


def _fetch_refused(repo_path: Path, blob_ids: list[str]) -> set[str]:
    """The ids a plain ``git fetch`` of the store by id is refused (one fetch an id)."""
    refused: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="gitmem-receipt-") as scratch:
        init = ["git", "init", "-q", "--bare", scratch]
        subprocess.run(init, check=True, capture_output=True)  # noqa: S603  an argument list (no shell) of our own
        for blob_id in blob_ids:
            proc = subprocess.run(  # noqa: S603  an argument list (no shell) of our own
                ["git", "-C", scratch, "fetch", "-q", "--no-write-fetch-head", str(repo_path), blob_id],  # noqa: S607  git from PATH, an argument list (no shell)
                capture_output=True,
                check=False,
            )
            if proc.returncode != 0:
                refused.add(blob_id)
    return refused


def make_receipt(
    repo_path: Path, signer: ReceiptSigner, fields: dict[str, Any], purged: list[str], unpurged: list[str]
) -> dict[str, Any]:
    """A signed receipt: ``fields`` (store, kind, versions, who, when, why, tips, entry digest) and the
    proof for each blob that had to go (``purged`` verified unreadable; ``unpurged`` still readable)."""
    checked = sorted(purged + unpurged)[:FETCH_CHECKS]
    refused = _fetch_refused(repo_path, checked)
    blobs = [
        {
            "id": blob,
            "in_repository": blob in unpurged,
            **({"fetch_refused": blob in refused} if blob in checked else {}),
        }
        for blob in sorted(purged + unpurged)
    ]
    receipt = {
        "type": "erasure_receipt",
        "format": FORMAT,
        **fields,
        "blobs": blobs,
        "fetch_checked": len(checked),
        "public_key": signer.public.openssh,
    }
    return {"receipt": receipt, "signature": signer.sign_as(canonical(receipt), NAMESPACE).decode()}


def verify_receipt(document: dict[str, Any], keys: list[PublicKey]) -> list[str]:
    """What is wrong with a receipt ([] when it holds): its signature by one of ``keys`` over its
    receipt, and its own claims (every blob gone from the repository and refused to a fetch)."""
    try:
        receipt, armored = document["receipt"], document["signature"]
        signature = sshsig.parse(armored.encode())
    except (KeyError, TypeError, AttributeError, BadSignature) as exc:
        return [f"not a signed receipt ({exc})"]
    if signature.key not in keys:
        return [f"signed by {signature.key.fingerprint}, not by the key given"]
    if not signature.verify(canonical(receipt), NAMESPACE):
        return ["the signature does not match: the receipt was changed after it was signed"]
    problems = [f"blob {b['id']} was still in the repository" for b in receipt.get("blobs", []) if b["in_repository"]]
    problems += [
        f"blob {b['id']} could still be fetched" for b in receipt.get("blobs", []) if b.get("fetch_refused") is False
    ]
    return problems


__all__ = ["NAMESPACE", "canonical", "entry_digest", "make_receipt", "verify_receipt"]
