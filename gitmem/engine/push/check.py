"""pre-receive's checks: every pushed commit replayed against the store's notes, and every rule a write
through the API meets applied to every change it makes (:mod:`gitmem.engine.push.receive` runs them).

The checks that need no store come first (the commit's message and identities, each new blob's mode,
path, size, encoding and content); then the commit's versions are derived and replayed on the notes
(:mod:`gitmem.git.replay`), and what they would make is checked: collisions between paths, names that
differ only in case, the store's count and size limits.
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pygit2

from gitmem.errors import GitmemError, SecretRefused
from gitmem.git import pushes, repository
from gitmem.git.commits import parse_message
from gitmem.git.replay import Notes
from gitmem.model import StoreInfo
from gitmem.rules import paths
from gitmem.rules.policy import StorePolicy

ZERO = "0" * 40
MAX_REASONS = 20
MODE_BLOB = 0o100644
MODE_EXECUTABLE = 0o100755
MODE_TREE = 0o040000
MODE_LINK = 0o120000
MODE_GITLINK = 0o160000


@dataclass
class Verdict:
    """What checking a push found: refusals, or the record of each commit to spool."""

    reasons: list[str] = field(default_factory=list)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    commits: list[str] = field(default_factory=list)

    def refuse(self, commit: pygit2.Commit | None, path: str | None, reason: str) -> None:
        where = " ".join(x for x in (str(commit.id)[:7] if commit is not None else None, path) if x)
        self.reasons.append(f"{where}: {reason}" if where else reason)


class NoteState(Notes):
    """The store's notes while the pushed commits are replayed (:mod:`gitmem.git.replay`), with what
    the push's checks need of them: sizes and the spellings of every folder and name."""

    def __init__(self, rows: Iterable[tuple[str, str, int]]) -> None:
        self.sizes: dict[str, int] = {}
        self.spellings: dict[str, Counter[str]] = {}  # paths.fold(level) -> the levels so spelled
        self.total = 0
        super().__init__(rows)

    def _add(self, path: str, memory_id: str, size: int) -> None:
        super()._add(path, memory_id, size)
        self.sizes[path] = size
        for level in paths.levels(path):
            self.spellings.setdefault(paths.fold(level), Counter())[level] += 1
        self.total += size

    def _remove(self, path: str) -> None:
        super()._remove(path)
        for level in paths.levels(path):
            self.spellings[paths.fold(level)][level] -= 1
        self.total -= self.sizes.pop(path)

    def case_twin(self, path: str) -> str | None:
        """A note or folder whose path differs from ``path`` or a folder above it only in case."""
        for level in paths.levels(path):
            spelled = self.spellings.get(paths.fold(level), Counter())
            twin = next((other for other, count in spelled.items() if count > 0 and other != level), None)
            if twin is not None:
                return twin
        return None


class PushCheck:
    """Apply section 5 to every commit of one push of ``refs/heads/main``."""

    def __init__(
        self,
        repo: pygit2.Repository,
        info: StoreInfo,
        policy: StorePolicy,
        user_id: str,
        decode: pushes.Decode | None,
        now: dt.datetime,
        user_name: str = "",
        emails: frozenset[str] = frozenset(),
    ) -> None:
        self.repo = repo
        self.info = info
        self.policy = policy
        self.user_id = user_id
        self.pusher = pusher_identity(user_id, user_name)
        self.emails = emails  # the addresses the pusher registered, lower case
        self.decode = decode
        self.now = now
        self.verdict = Verdict()

    def run(self, old: str, new: str, notes: NoteState) -> Verdict:
        verdict = self.verdict
        walker = self.repo.walk(new, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE)
        if old != ZERO:
            walker.hide(old)
        commits = list(walker)
        merges = [c for c in commits if len(c.parent_ids) > 1]
        if merges:
            verdict.refuse(
                merges[0],
                None,
                "merge commits are refused: a store's history is a single line (rebase instead of merging)",
            )
            return verdict
        expected_parent = None if old == ZERO else old
        for step, commit in enumerate(commits):
            parents = [str(p) for p in commit.parent_ids]
            if (parents[0] if parents else None) != expected_parent:
                verdict.refuse(commit, None, "this commit does not follow the store's main")
                return verdict
            expected_parent = str(commit.id)
            when = self.now + dt.timedelta(microseconds=step)
            self.check_commit(commit, notes, when)
            if len(verdict.reasons) >= MAX_REASONS:
                break
        return verdict

    def check_commit(self, commit: pygit2.Commit, notes: NoteState, when: dt.datetime) -> None:
        verdict = self.verdict
        before = len(verdict.reasons)
        if parse_message(commit.message):
            verdict.refuse(
                commit,
                None,
                "the message carries gitmem's version trailers (Memory-Id, ...); only"
                " gitmem writes those: reword the commit",
            )
        for role, sig in (("author", commit.author), ("committer", commit.committer)):
            self._check_identity(commit, role, sig)
        self._check_text(commit, "the commit message", commit.message)
        self._check_text(commit, "the author's and committer's names", [commit.author.name, commit.committer.name])
        parent_tree = self.repo[commit.parent_ids[0]].tree if commit.parent_ids else None
        written = list(self._changed_blobs(commit, commit.tree, parent_tree, ""))
        for tree_path, entry in written:
            self._check_blob(commit, tree_path, entry)
        if len(verdict.reasons) > before:
            return
        record = pushes.PushRecord(self.user_id, when, self.info.id)
        try:
            versions = pushes.derive_versions(self.repo, commit, notes.note_at, record, self.decode)
        except (GitmemError, UnicodeDecodeError, ValueError) as exc:
            verdict.refuse(commit, None, f"its changes could not be read: {exc}")
            return
        steps = [notes.apply(version) for version in versions]
        for step in steps:
            if step is None or step.path is None:
                continue
            # The store's notes and the pushed tree agree, so a pushed note displaces another only
            # when one would sit at, above or below the other's path.
            clash = next((other.path for other in step.displaced if other.path != step.path), None)
            if clash is not None:
                verdict.refuse(
                    commit,
                    step.path,
                    f"a note may not sit at, above or below another note's path; it collides with {clash}",
                )
            twin = notes.case_twin(step.path)
            if twin is not None:
                verdict.refuse(
                    commit,
                    step.path,
                    f"it differs only in case from {twin}; on a case-insensitive file system they would be one file",
                )
        try:
            self.policy.check_counts(len(notes), notes.total)
        except GitmemError as exc:
            verdict.refuse(commit, None, f"{exc.message} (after this commit: {len(notes)} notes, {notes.total} bytes)")
        verdict.records[str(commit.id)] = replace(record, versions=tuple(versions)).to_json()
        verdict.commits.append(str(commit.id))

    def _check_identity(self, commit: pygit2.Commit, role: str, sig: pygit2.Signature) -> None:
        """The author and committer are the pusher, so ``git log`` in any clone is a true audit: nobody
        can push a commit that says someone else (or gitmem) wrote it. The pusher is one of the
        addresses they registered (any name: it is theirs to spell), or gitmem's own identity for
        them, name and address."""
        email = (sig.email or "").lower()
        if email in self.emails:
            return
        name, own = self.pusher
        if sig.name == name and email == own.lower():
            return
        commit_as = git_identity(self.user_id, name, sorted(self.emails))
        self.verdict.refuse(
            commit,
            None,
            f"the {role} {sig.name} <{sig.email}> is not you, the pusher. If {sig.email} is your address,"
            " register it (the web view's Account page, POST /v1/users/me/emails, or an admin's"
            f" gitmem users emails add {self.user_id} {shlex.quote(sig.email or '')}) and push again;"
            f" otherwise commit as {commit_as[0]} <{commit_as[1]}> (git config user.name"
            f" {shlex.quote(commit_as[0])}; git config user.email {commit_as[1]}; then git commit --amend"
            " --reset-author, or git rebase -r --exec 'git commit --amend --no-edit --reset-author')",
        )

    def _changed_blobs(
        self, commit: pygit2.Commit, tree: pygit2.Tree, old: pygit2.Tree | None, prefix: str
    ) -> Iterator[tuple[str, pygit2.Object]]:
        """Entries of ``tree`` that are new or changed against ``old`` (recursing into changed folders),
        refusing what is not a plain file or folder and names used twice in one folder."""
        old_entries: dict[bytes, pygit2.Object] = {}
        if old is not None:
            for entry in old:
                assert entry.raw_name is not None  # a tree's entries are named; only looked-up objects are not  # noqa: S101  narrows the type for mypy; never a check of input
                old_entries.setdefault(entry.raw_name, entry)
        seen: set[bytes] = set()
        for entry in tree:
            raw = entry.raw_name
            assert raw is not None  # noqa: S101  narrows the type for mypy; never a check of input
            try:
                name = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.verdict.refuse(
                    commit, paths.api_path(prefix + raw.decode("utf-8", "replace")), "the name is not valid UTF-8"
                )
                continue
            tree_path = prefix + name
            api = paths.api_path(tree_path)
            if raw in seen:
                self.verdict.refuse(
                    commit,
                    api,
                    "two entries share this name: a note may not sit at, above or below another note's path",
                )
                continue
            seen.add(raw)
            before = old_entries.get(raw)
            if before is not None and before.id == entry.id and before.filemode == entry.filemode:
                continue
            mode = entry.filemode
            if mode == MODE_TREE:
                old_sub = (
                    repository.tree_at(self.repo, before.id)
                    if before is not None and before.filemode == MODE_TREE
                    else None
                )
                yield from self._changed_blobs(
                    commit, repository.tree_at(self.repo, entry.id), old_sub, tree_path + "/"
                )
            elif mode == MODE_BLOB:
                yield tree_path, entry
            elif mode == MODE_EXECUTABLE:
                self.verdict.refuse(commit, api, "the file is executable; notes are plain files (chmod -x it)")
            elif mode == MODE_LINK:
                self.verdict.refuse(commit, api, "symbolic links are refused; notes are plain files")
            elif mode == MODE_GITLINK:
                self.verdict.refuse(commit, api, "submodules are refused; notes are plain files")
            else:
                self.verdict.refuse(commit, api, f"Git file mode {mode:o} is refused; notes are plain files")

    def _check_blob(self, commit: pygit2.Commit, tree_path: str, entry: pygit2.Object) -> None:
        api = paths.api_path(tree_path)
        try:
            self._check_path(api)
        except SecretRefused as exc:  # the refusal does not repeat a name that holds a secret
            self.verdict.refuse(commit, None, f"a file's name: {exc.message}")
            return
        except GitmemError as exc:
            self.verdict.refuse(commit, api, exc.message)
            return
        try:
            if self.info.archived_at is not None:
                raise GitmemError(
                    f"memory store {self.info.id} is archived; its notes can be read and deleted,"
                    " not created or changed"
                )
            blob = repository.blob_at(self.repo, entry.id)
            if blob.size > self.policy.max_content_bytes * 2 + 4096:  # plainly too large; don't decode it
                raise GitmemError(f"the note is {blob.size} bytes; at most {self.policy.max_content_bytes} are allowed")
            data = blob.data
            if self.decode is not None:
                try:
                    data = self.decode(api, data)
                except GitmemError as exc:
                    raise GitmemError(
                        f"the content is not encrypted with this store's key ({exc.message});"
                        " push from a clone set up with the key"
                    ) from None
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise GitmemError(f"the content is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
            self.policy.check_content(api, text)
        except GitmemError as exc:
            self.verdict.refuse(commit, api, exc.message)

    def _check_text(self, commit: pygit2.Commit, what: str, value: object) -> None:
        # A commit's message and names are kept in every clone's history like a note's body.
        try:
            self.policy.filters.check_caller_text(what, value)
        except GitmemError as exc:
            self.verdict.refuse(commit, None, exc.message)

    def _check_path(self, api: str) -> None:
        segments = api[1:].split("/")
        for index, segment in enumerate(segments):
            if paths._is_git_reserved(segment, top_level=index == 0):
                raise GitmemError(f"{segment!r} is a name Git reserves; it cannot be a note")
        self.policy.check_path(api)


def pusher_identity(user_id: str, user_name: str) -> tuple[str, str]:
    """The Git identity (name, e-mail) a user's pushed commits must carry: their gitmem name and id."""
    return user_name or user_id, f"{user_id}@user.gitmem"


def git_identity(user_id: str, user_name: str, emails: list[str]) -> tuple[str, str]:
    """The identity to commit as (what ``gitmem clone`` configures): the first address the user
    registered, else gitmem's own identity for them."""
    name, email = pusher_identity(user_id, user_name)
    return name, emails[0] if emails else email
