"""The rewrite log: one signed commit per history rewrite on ``refs/gitmem/rewrites``, chained by parent,
that no rewrite ever rewrites (docs/audit.md).

Retention, redaction and key rotation change every commit id after the first change they make, so a
clone taken before and today's history can only be compared through a record of what each rewrite did.
Each entry is a commit (signed like every gitmem commit, :mod:`gitmem.git.signing`) whose parent is the
entry before it, authored by gitmem at the rewrite's time. Its tree holds ``entry.json`` and, when the
rewrite deleted content, ``receipt.json`` (the erasure receipt, :mod:`gitmem.engine.audit.receipts`).
Its message says the same in brief::

    rewrite: redaction, 1 redacted

    Rewrite-Kind: redaction
    Old-Tip: 3f1c...
    New-Tip: 9ab2...
    Rewrite-By: user_actor user_01...
    Rewrite-At: 2026-12-02T14:00:00.000000Z

``entry.json`` (keys sorted, one object; this is the format other tools read)::

    {"at": "2026-12-02T14:00:00.000000Z",      # when the rewrite swapped main (RFC 3339, UTC)
     "by": "user_actor user_01..." | "service", # who asked for it (a trailer's actor text)
     "dropped": ["memver_..."],                 # version ids no longer in the history
     "format": 1,
     "kind": "retention" | "redaction" | "rotation",
     "new_tip": "<40 hex>", "old_tip": "<40 hex>",   # main after and before the swap
     "reason": "retention window 30 days",      # why, in words; never content or a redacted path
     "redacted": ["memver_..."],                # version ids blanked (kept, without path or content)
     "store_id": "memstore_...",
     "tool": "gitmem 0.1.0"}                    # what wrote it

No content and no path of a redacted version is ever in an entry. The ref is fetched by clones
(``git fetch origin refs/gitmem/rewrites:refs/gitmem/rewrites``; ``gitmem clone`` sets it up), never
pushed (only ``main`` may be), and appended to with a compare-and-swap. A removed or altered entry
breaks the chain of parents or a signature, which ``gitmem audit verify`` reports.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

import pygit2

from gitmem.clock import iso
from gitmem.errors import StoreBusy
from gitmem.git import repository
from gitmem.git.commits import parse_time
from gitmem.git.signing import Signer

REWRITES_REF = "refs/gitmem/rewrites"
ENTRY_FILE = "entry.json"
RECEIPT_FILE = "receipt.json"
FORMAT = 1
_CAS_ATTEMPTS = 50


@dataclass(frozen=True)
class LogEntry:
    """One rewrite, as its entry says."""

    kind: str
    store_id: str
    old_tip: str | None
    new_tip: str | None
    at: dt.datetime
    by: str
    reason: str
    dropped: tuple[str, ...] = ()
    redacted: tuple[str, ...] = ()
    tool: str = ""
    receipt: dict[str, Any] | None = field(default=None, compare=False)
    commit_id: str | None = None  # the entry's commit, once read back

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "kind": self.kind,
            "store_id": self.store_id,
            "old_tip": self.old_tip,
            "new_tip": self.new_tip,
            "at": iso(self.at),
            "by": self.by,
            "reason": self.reason,
            "dropped": list(self.dropped),
            "redacted": list(self.redacted),
            "tool": self.tool,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], commit_id: str, receipt: dict[str, Any] | None) -> LogEntry:
        return cls(
            kind=str(data["kind"]),
            store_id=str(data["store_id"]),
            old_tip=data.get("old_tip"),
            new_tip=data.get("new_tip"),
            at=parse_time(str(data["at"])),
            by=str(data.get("by", "")),
            reason=str(data.get("reason", "")),
            dropped=tuple(data.get("dropped", ())),
            redacted=tuple(data.get("redacted", ())),
            tool=str(data.get("tool", "")),
            receipt=receipt,
            commit_id=commit_id,
        )

    def message(self) -> str:
        counts = [f"{len(self.dropped)} dropped"] if self.dropped else []
        counts += [f"{len(self.redacted)} redacted"] if self.redacted else []
        subject = f"rewrite: {self.kind}" + (f", {', '.join(counts)}" if counts else "")
        trailers = [
            f"Rewrite-Kind: {self.kind}",
            f"Old-Tip: {self.old_tip or 'none'}",
            f"New-Tip: {self.new_tip or 'none'}",
            f"Rewrite-By: {self.by}",
            f"Rewrite-At: {iso(self.at)}",
        ]
        return subject + "\n\n" + "\n".join(trailers) + "\n"


def _dumps(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, sort_keys=True, indent=1) + "\n").encode()


def entry_bytes(entry: LogEntry) -> bytes:
    """``entry.json`` as it is written (what a receipt's ``entry_sha256`` hashes)."""
    return _dumps(entry.to_json())


def _show_log(repo: pygit2.Repository) -> None:
    """A store made before the log hid all of ``refs/gitmem`` from clones: hide only the scratch ref."""
    try:
        hidden = repo.config["uploadpack.hideRefs"]
    except (KeyError, ValueError, pygit2.GitError):
        hidden = None
    if hidden == "refs/gitmem":
        repo.config["uploadpack.hideRefs"] = repository.HIDDEN_REFS


def append(repo: pygit2.Repository, entry: LogEntry, signer: Signer | None) -> str:
    """Add ``entry`` after the log's tip (a compare-and-swap, retried); the new entry's commit id."""
    builder = repo.TreeBuilder()
    builder.insert(ENTRY_FILE, repo.create_blob(entry_bytes(entry)), pygit2.enums.FileMode.BLOB)
    if entry.receipt is not None:
        builder.insert(RECEIPT_FILE, repo.create_blob(_dumps(entry.receipt)), pygit2.enums.FileMode.BLOB)
    tree = builder.write()
    _show_log(repo)
    author = pygit2.Signature("gitmem", "gitmem@localhost", int(entry.at.timestamp()), 0)
    for _ in range(_CAS_ATTEMPTS):
        ref = repo.references.get(REWRITES_REF)
        parent = repository.direct_target(ref) if ref is not None else None
        oid = repository.commit(repo, tree=tree, parent=parent, author=author, message=entry.message(), signer=signer)
        if repository.compare_and_swap(repo, parent, oid, ref=REWRITES_REF):
            return str(oid)
    raise StoreBusy("the rewrite log kept changing; the entry was not written")


def _blob_json(repo: pygit2.Repository, tree: pygit2.Tree, name: str) -> dict[str, Any] | None:
    if name not in tree:
        return None
    data: dict[str, Any] = json.loads(repository.blob_at(repo, tree[name].id).data)
    return data


def read(repo: pygit2.Repository, tip: pygit2.Oid | str | None = None) -> list[LogEntry]:
    """Every entry of the log (oldest first), from its tip or ``tip``; [] if there is none. Entries whose
    commit holds no ``entry.json`` are skipped (``gitmem audit verify`` reports them)."""
    if tip is None:
        ref = repo.references.get(REWRITES_REF)
        if ref is None:
            return []
        tip = repository.direct_target(ref)
    entries: list[LogEntry] = []
    current: pygit2.Commit | None = repository.commit_at(repo, tip)
    while current is not None:
        data = _blob_json(repo, current.tree, ENTRY_FILE)
        if data is not None:
            entries.append(LogEntry.from_json(data, str(current.id), _blob_json(repo, current.tree, RECEIPT_FILE)))
        current = current.parents[0] if current.parents else None
    return entries[::-1]


__all__ = ["ENTRY_FILE", "RECEIPT_FILE", "REWRITES_REF", "LogEntry", "append", "entry_bytes", "read"]
