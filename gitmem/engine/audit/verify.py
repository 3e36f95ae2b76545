"""``gitmem audit verify``: a store checked end to end (docs/audit.md).

1. **Signatures.** Every commit on ``main`` carries a good signature (:mod:`gitmem.git.signing`) by a key
   of the home's allowed-signers file that was valid at its committer time, or it is a pushed commit
   that ``refs/notes/gitmem`` (every commit of which must be signed) records, or a push still spooled.
2. **Index.** Every version the history's trailers (and pushed commits) give is in the index, with the
   same record, blob and commit, and the index has no other (server side only: a clone has no index).
3. **Rewrite log.** ``refs/gitmem/rewrites`` is one line of commits, each signed, each with its entry;
   ``main`` descends from the newest entry's new tip (a dropped last entry leaves a rewrite unexplained).
4. **An older clone** (:mod:`gitmem.engine.audit.compare`): today's history is that one's but for what
   the log records as dropped or redacted.

Each check says what it checked; a break is a :class:`Problem` naming its commit, oldest first.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2

from gitmem.crypto.signing_key import KnownKey
from gitmem.crypto.sshsig import BadSignature, PublicKey, parse
from gitmem.engine.audit.compare import compare
from gitmem.engine.index.queries import VersionRow
from gitmem.engine.rewrite.history import Entry, History
from gitmem.errors import InvalidRequest
from gitmem.git import pushes, repository, rewrite_log
from gitmem.git.repository import MAIN, NOTES_REF
from gitmem.git.signing import split

if TYPE_CHECKING:
    from gitmem.engine.store.store import MemoryStore

_COMMITTER = re.compile(rb"^committer .* (\d+) [+-]\d{4}$", re.M)


@dataclass(frozen=True)
class Problem:
    """One break: which check, which commit (if one), what is wrong."""

    check: str
    commit: str | None
    message: str

    def text(self) -> str:
        return f"{self.check}: {self.commit[:12] + ': ' if self.commit else ''}{self.message}"


@dataclass
class AuditReport:
    """What ``gitmem audit verify`` checked and found."""

    store_id: str
    checked: dict[str, str] = field(default_factory=dict)  # check -> what it covered, in words
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "memory_store_audit",
            "memory_store_id": self.store_id,
            "ok": self.ok,
            "checked": dict(self.checked),
            "problems": [{"check": p.check, "commit_id": p.commit, "message": p.message} for p in self.problems],
        }


class Signatures:
    """Checks commits' signatures against the home's keys (each Ed25519 key parsed once)."""

    def __init__(self, keys: Iterable[KnownKey]) -> None:
        self.keys: dict[PublicKey, KnownKey] = {k.key: k for k in keys}

    def problem(self, raw: bytes) -> str | None:
        """Why the commit's signature does not hold (None: it does)."""
        payload, armored = split(raw)
        if armored is None:
            return "unsigned"
        try:
            signature = parse(armored)
        except BadSignature as exc:
            return f"malformed signature ({exc.message})"
        known = self.keys.get(signature.key)
        if known is None:
            return f"signed by {signature.key.fingerprint}, not a key of this home"
        if not signature.verify(payload):
            return "bad signature: its bytes changed after it was signed (tampered message, author, tree or parent)"
        found = _COMMITTER.search(payload)
        when = int(found[1]) if found else 0
        if not known.valid_at(when):
            return f"signed by {signature.key.fingerprint} after that key's valid-before"
        return None


def _commits(repo: pygit2.Repository, tip: pygit2.Oid) -> list[pygit2.Oid]:
    """``main``'s commits, oldest first (first parents: gitmem's history is one line)."""
    walker = repo.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE)
    walker.simplify_first_parent()
    return [commit.id for commit in walker]


def _pushed(repo: pygit2.Repository) -> set[str]:
    """Commits whose push is recorded: a note on refs/notes/gitmem, or a spool post-receive has not written."""
    recorded: set[str] = set()
    if repo.references.get(NOTES_REF) is not None:
        recorded |= {str(n.annotated_id) for n in repo.notes(NOTES_REF)}  # type: ignore[call-arg]  # stub lacks ref
    for spool in pushes.spools(Path(repo.path)):
        recorded |= set(spool.records)
    return recorded


def check_signatures(
    repo: pygit2.Repository, tip: pygit2.Oid | None, signatures: Signatures, report: AuditReport
) -> list[pygit2.Oid]:
    """Check 1 on the history at ``tip`` (main); returns its commits, oldest first."""
    commits = _commits(repo, tip) if tip is not None else []
    pushed = _pushed(repo)
    good = by_pusher = 0
    for oid in commits:
        why = signatures.problem(repository.object_at(repo, oid).read_raw())
        if why is None:
            good += 1
        elif str(oid) in pushed:
            by_pusher += 1
        else:
            reason = "unsigned and no recorded push" if why == "unsigned" else why
            report.problems.append(Problem("signatures", str(oid), reason))
    notes_ref = repo.references.get(NOTES_REF)
    notes = _commits(repo, repository.direct_target(notes_ref)) if notes_ref is not None else []
    for oid in notes:
        why = signatures.problem(repository.object_at(repo, oid).read_raw())
        if why is not None:
            report.problems.append(Problem("push records", str(oid), f"a commit of {NOTES_REF}: {why}"))
    report.checked["signatures"] = (
        f"{len(commits)} commits on main: {good} signed by this home, {by_pusher} pushed with a recorded pusher;"
        f" {len(notes)} commits of {NOTES_REF}"
    )
    return commits


def _index_differs(row: VersionRow, entry: Entry) -> str:
    """The fields in which an index row and the history's version differ ('' if none). A note's creation
    time is the note's (the index keeps the first it saw), not the version's: not compared."""
    names = [f.name for f in dataclasses.fields(entry.record) if f.name != "note_created_at"]
    fields = [name for name in names if getattr(row.record, name) != getattr(entry.record, name)]
    fields += ["blob"] if row.blob_id != entry.blob else []
    fields += ["commit"] if row.commit_id != entry.commit else []
    return ", ".join(fields)


def check_index(store: MemoryStore, entries: list[Entry], report: AuditReport) -> None:
    """Check 2: the index holds exactly the versions the history gives."""
    rows = {row.record.version_id: row for row in store.index.all_versions()}
    for entry in entries:
        row = rows.pop(entry.record.version_id, None)
        if row is None:
            report.problems.append(
                Problem("index", entry.commit, f"version {entry.record.version_id} is not in the index")
            )
        elif differs := _index_differs(row, entry):
            message = f"version {entry.record.version_id}: the index differs from its trailers in {differs}"
            report.problems.append(Problem("index", entry.commit, message))
    for row in rows.values():
        report.problems.append(
            Problem("index", row.commit_id, f"the index has version {row.record.version_id}, the history does not")
        )
    report.checked["index"] = f"{len(entries)} versions: trailers and index agree"


def check_rewrite_log(
    repo: pygit2.Repository, main: pygit2.Oid | None, signatures: Signatures, report: AuditReport
) -> list[rewrite_log.LogEntry]:
    """Check 3 (``main``: the history's tip); returns the log's entries, oldest first."""
    ref = repo.references.get(rewrite_log.REWRITES_REF)
    if ref is None:
        report.checked["rewrite log"] = "no rewrite yet"
        return []
    tip = repository.direct_target(ref)
    count = 0
    current: pygit2.Commit | None = repository.commit_at(repo, tip)
    while current is not None:
        count += 1
        why = signatures.problem(current.read_raw())
        if why is not None:
            report.problems.append(Problem("rewrite log", str(current.id), f"entry {why}: the chain is broken"))
        if len(current.parents) > 1:
            report.problems.append(Problem("rewrite log", str(current.id), "an entry with two parents"))
        if rewrite_log.ENTRY_FILE not in current.tree:
            report.problems.append(Problem("rewrite log", str(current.id), "an entry without entry.json"))
        current = current.parents[0] if current.parents else None
    entries = rewrite_log.read(repo, tip)
    last = entries[-1].new_tip if entries else None
    if last is not None and main is not None and str(main) != last and not _descends(repo, main, last):
        report.problems.append(
            Problem("rewrite log", entries[-1].commit_id, "main does not descend from the newest rewrite's new tip")
        )
    report.checked["rewrite log"] = f"{count} entries, each signed, chained by parent"
    return entries


def _descends(repo: pygit2.Repository, tip: pygit2.Oid, ancestor: str) -> bool:
    try:
        return bool(repo.descendant_of(tip, ancestor))
    except (KeyError, ValueError, pygit2.GitError):
        return False


def history(repo: pygit2.Repository, tip: pygit2.Oid | None) -> list[Entry]:
    """Every version of the history at ``tip`` (oldest first), as the rewrite and the index read it."""
    return History(repo).read(tip, None) if tip is not None else []


def verify(
    repo: pygit2.Repository,
    keys: list[KnownKey],
    *,
    store: MemoryStore | None = None,
    store_id: str = "",
    older: tuple[pygit2.Repository, pygit2.Oid] | None = None,
    tip: pygit2.Oid | None = None,
) -> AuditReport:
    """Every check on ``repo``'s history at ``tip`` (its main unless given: a clone's is origin/main);
    the index's too with ``store``; the comparison with ``older``, a repository and its tip."""
    report = AuditReport(store.id if store is not None else store_id)
    signatures = Signatures(keys)
    tip = tip if tip is not None else repository.read_tip(repo)
    check_signatures(repo, tip, signatures, report)
    entries = history(repo, tip)
    if store is not None:
        check_index(store, entries, report)
    log_entries = check_rewrite_log(repo, tip, signatures, report)
    if older is not None:
        found, summary = compare(history(*older), entries, log_entries)
        report.problems += [Problem("older clone", commit, message) for commit, message in found]
        report.checked["older clone"] = summary
    return report


def verify_store(store: MemoryStore, keys: list[KnownKey], against: str | None = None) -> AuditReport:
    """:func:`verify` for a store of a home, compared (with ``against``) with an old tip of its own."""
    older = None
    if against is not None:
        try:
            older = (store.repo, store.repo.revparse_single(against).peel(pygit2.Commit).id)
        except (KeyError, ValueError, pygit2.GitError):
            raise InvalidRequest(f"{against!r} is not a commit of memory store {store.id}") from None
    return verify(store.repo, keys, store=store, older=older)


__all__ = ["MAIN", "AuditReport", "Problem", "Signatures", "verify", "verify_store"]
