"""The push hooks' engine: what ``hooks/pre-receive`` and ``hooks/post-receive`` run (docs/architecture.md).

``python -m gitmem.engine.receive pre-receive|post-receive`` inside ``git receive-pack``, with ``<old> <new>
<ref>`` lines on standard input and the pusher in the environment the server gives ``git http-backend``:

==================  ==============================================================================
``GITMEM_USER_ID``  the pusher (``user_...``); every pushed change becomes a version by this user
``GITMEM_ACCESS``   ``read_write`` (anything else is refused)
``GITMEM_STORE_ID`` the store (default: the repository's directory name)
``GITMEM_HOME``     the data home (default: two levels above the repository)
``GITMEM_FILTERS``  extra content filters, as for the server (:func:`gitmem.rules.filters.load_filters`)
``GITMEM_PYTHON``   the interpreter the hook scripts run this module with
==================  ==============================================================================

pre-receive runs while the pushed objects sit in Git's quarantine (``GIT_QUARANTINE_PATH``; libgit2
ignores ``GIT_OBJECT_DIRECTORY``, so the quarantine is added as an alternate). It accepts only a
fast-forward of ``refs/heads/main`` made of single-parent commits, and replays every pushed commit
against the notes the store holds, applying every rule of section 5 to every change. A refusal is
printed as ``gitmem: refused: <commit> <path>: <reason>`` (Git shows it behind ``remote:``) and
leaves the store exactly as it was. On success it spools the push's record (pusher, time, the versions
each commit makes) to ``gitmem/pushes/<new>.json``.

post-receive turns the spool into Git notes on ``refs/notes/gitmem`` (a compare-and-swap, so it never
loses a note written concurrently), brings the index up to date and deletes the spool. Until then the
index reads the spool (:func:`gitmem.git.pushes.spooled_record`), so attribution never depends on timing.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pygit2

from gitmem import ids
from gitmem.engine.catalog import Catalog
from gitmem.engine.home import Gitmem, database_setting, fsync_setting
from gitmem.engine.store_index import StoreIndex
from gitmem.errors import GitmemError, NotFound
from gitmem.git import pushes, repository
from gitmem.git.commits import parse_message
from gitmem.model import StoreInfo
from gitmem.rules import paths
from gitmem.rules.filters import load_filters
from gitmem.rules.policy import StorePolicy, policy_for

log = logging.getLogger(__name__)

ZERO = "0" * 40
MAX_REASONS = 20
NOTES_CAS_ATTEMPTS = 50
STALE_SPOOL_SECONDS = 600.0
NOTES_AUTHOR = ("gitmem", "gitmem@localhost")
MODE_BLOB = 0o100644
MODE_EXECUTABLE = 0o100755
MODE_TREE = 0o040000
MODE_LINK = 0o120000
MODE_GITLINK = 0o160000
_COMMIT_REASON = re.compile(r"[0-9a-f]{7}[ :]")


class Refused(Exception):
    """The push as a whole is refused (before any commit is looked at)."""


@dataclass
class PushEnv:
    """Who pushes where, from the environment the server set."""

    git_dir: Path
    user_id: str
    access: str
    store_id: str
    home: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str], git_dir: Path) -> PushEnv:
        git_dir = git_dir.resolve()
        store_id = env.get("GITMEM_STORE_ID") or git_dir.name.removesuffix(".git")
        home = Path(env["GITMEM_HOME"]) if env.get("GITMEM_HOME") else git_dir.parent.parent
        return cls(
            git_dir, env.get("GITMEM_USER_ID", ""), env.get("GITMEM_ACCESS", "").replace("-", "_"), store_id, home
        )


def _now_text(when: dt.datetime) -> str:
    """ISO 8601 in UTC, always with microseconds."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def open_repo(git_dir: Path, env: Mapping[str, str]) -> pygit2.Repository:
    """The store as receive-pack sees it: with the quarantined objects of the push, if any."""
    repo = pygit2.Repository(str(git_dir))
    quarantine = env.get("GIT_QUARANTINE_PATH") or ""
    if quarantine and Path(quarantine).is_dir():
        repo.odb.add_disk_alternate(quarantine)
    return repo


# -- pre-receive ----------------------------------------------------------------------------------


@dataclass
class Verdict:
    """What checking a push found: refusals, or the record of each commit to spool."""

    reasons: list[str] = field(default_factory=list)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    commits: list[str] = field(default_factory=list)

    def refuse(self, commit: pygit2.Commit | None, path: str | None, reason: str) -> None:
        where = " ".join(x for x in (str(commit.id)[:7] if commit is not None else None, path) if x)
        self.reasons.append(f"{where}: {reason}" if where else reason)


class NoteState:
    """The store's notes while the pushed commits are replayed: path -> (memory id, size)."""

    def __init__(self, rows: Iterator[tuple[str, str, int]]) -> None:
        self.by_path: dict[str, tuple[str, int]] = {}
        self.path_of: dict[str, str] = {}
        self.folders: Counter[str] = Counter()
        self.spellings: dict[str, Counter[str]] = {}  # paths.fold(level) -> the levels so spelled
        self.total = 0
        for path, memory_id, size in rows:
            self._add(path, memory_id, size)

    def _add(self, path: str, memory_id: str, size: int) -> None:
        self.by_path[path] = (memory_id, size)
        self.path_of[memory_id] = path
        self.folders.update(paths.ancestors(path))
        for level in paths.levels(path):
            self.spellings.setdefault(paths.fold(level), Counter())[level] += 1
        self.total += size

    def _remove(self, path: str) -> None:
        memory_id, size = self.by_path.pop(path)
        self.path_of.pop(memory_id, None)
        self.folders.subtract(paths.ancestors(path))
        for level in paths.levels(path):
            self.spellings[paths.fold(level)][level] -= 1
        self.total -= size

    def note_id_at(self, path: str) -> str | None:
        found = self.by_path.get(path)
        return found[0] if found else None

    def apply(self, record: Any) -> None:
        old_path = self.path_of.get(record.memory_id)
        if old_path is not None:
            self._remove(old_path)
        if record.operation != "deleted":
            if record.path in self.by_path:
                self._remove(record.path)
            self._add(record.path, record.memory_id, record.content_size or 0)

    def case_twin(self, path: str) -> str | None:
        """A note or folder whose path differs from ``path`` or a folder above it only in case."""
        for level in paths.levels(path):
            spelled = self.spellings.get(paths.fold(level), Counter())
            twin = next((other for other, count in spelled.items() if count > 0 and other != level), None)
            if twin is not None:
                return twin
        return None

    def collision(self, path: str) -> str | None:
        """The path of a note at, above or below ``path`` (other than the one at ``path``), if any."""
        for folder in paths.ancestors(path):
            if folder in self.by_path:
                return folder
        if self.folders.get(path, 0) > 0:
            prefix = path + "/"
            return next((p for p in sorted(self.by_path) if p.startswith(prefix)), prefix)
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
    ) -> None:
        self.repo = repo
        self.info = info
        self.policy = policy
        self.user_id = user_id
        self.pusher = pusher_identity(user_id, user_name)
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
        parent_tree = self.repo[commit.parent_ids[0]].tree if commit.parent_ids else None
        written = list(self._changed_blobs(commit, commit.tree, parent_tree, ""))
        for tree_path, entry in written:
            self._check_blob(commit, tree_path, entry)
        if len(verdict.reasons) > before:
            return
        record: dict[str, Any] = {"user_id": self.user_id, "created_at": _now_text(when), "store_id": self.info.id}
        try:
            versions = pushes.derive_versions(self.repo, commit, notes.note_id_at, record, self.decode)
        except (GitmemError, UnicodeDecodeError, ValueError) as exc:
            verdict.refuse(commit, None, f"its changes could not be read: {exc}")
            return
        for version in versions:
            notes.apply(version)
        for version in versions:
            if version.operation == "deleted":
                continue
            clash = notes.collision(version.path)  # type: ignore[arg-type]
            if clash is not None:
                verdict.refuse(
                    commit,
                    version.path,
                    f"a note may not sit at, above or below another note's path; it collides with {clash}",
                )
            twin = notes.case_twin(version.path)  # type: ignore[arg-type]
            if twin is not None:
                verdict.refuse(
                    commit,
                    version.path,
                    f"it differs only in case from {twin}; on a case-insensitive file system they would be one file",
                )
        try:
            self.policy.check_counts(len(notes.by_path), notes.total)
        except GitmemError as exc:
            verdict.refuse(
                commit, None, f"{exc.message} (after this commit: {len(notes.by_path)} notes, {notes.total} bytes)"
            )
        record["versions"] = [pushes.version_json(v) for v in versions]
        verdict.records[str(commit.id)] = record
        verdict.commits.append(str(commit.id))

    def _check_identity(self, commit: pygit2.Commit, role: str, sig: pygit2.Signature) -> None:
        """The author and committer are the pusher, name and e-mail, so ``git log`` in any clone is a
        true audit: nobody can push a commit that says someone else (or gitmem) wrote it."""
        name, email = self.pusher
        if sig.name != name or (sig.email or "").lower() != email.lower():
            self.verdict.refuse(
                commit,
                None,
                f"the {role} {sig.name} <{sig.email}> is not you, the pusher;"
                f" commit as {name} <{email}> (git config user.name {shlex.quote(name)};"
                f" git config user.email {email}; then git commit --amend --reset-author,"
                " or git rebase -r --exec 'git commit --amend --no-edit --reset-author')",
            )

    def _changed_blobs(
        self, commit: pygit2.Commit, tree: pygit2.Tree, old: pygit2.Tree | None, prefix: str
    ) -> Iterator[tuple[str, pygit2.Object]]:
        """Entries of ``tree`` that are new or changed against ``old`` (recursing into changed folders),
        refusing what is not a plain file or folder and names used twice in one folder."""
        old_entries: dict[bytes, pygit2.Object] = {}
        if old is not None:
            for entry in old:
                assert entry.raw_name is not None  # a tree's entries are named; only looked-up objects are not
                old_entries.setdefault(entry.raw_name, entry)
        seen: set[bytes] = set()
        for entry in tree:
            raw = entry.raw_name
            assert raw is not None
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

    def _check_path(self, api: str) -> None:
        segments = api[1:].split("/")
        for index, segment in enumerate(segments):
            if paths._is_git_reserved(segment, top_level=index == 0):
                raise GitmemError(f"{segment!r} is a name Git reserves; it cannot be a note")
        self.policy.validate_path(api)


def pusher_identity(user_id: str, user_name: str) -> tuple[str, str]:
    """The Git identity (name, e-mail) a user's pushed commits must carry: their gitmem name and id."""
    return user_name or user_id, f"{user_id}@user.gitmem"


def _store_and_policy(push: PushEnv) -> tuple[Catalog, StoreInfo, StorePolicy, pushes.Decode | None, str]:
    url = database_setting()
    if url is None and not (push.home / "catalog.sqlite3").is_file():
        raise Refused(f"no gitmem catalog at {push.home}: pushes go through the gitmem server")
    catalog = Catalog.for_home(push.home, url)
    try:
        info = catalog.store(push.store_id)
    except NotFound:
        raise Refused(f"memory store {push.store_id} not found") from None
    if push.git_dir.name != f"{info.id}.git":
        raise Refused(f"this repository is not memory store {info.id}")
    try:
        user = catalog.credential(push.user_id)
    except NotFound:
        user = None
    if user is None or user.kind != "user" or user.workspace_id != info.workspace_id:
        raise Refused(f"{push.user_id} is not a user of this store's workspace")
    if user.revoked_at is not None:
        raise Refused(f"user {push.user_id} is revoked")
    if user.role == "read-only":
        raise Refused(f"user {push.user_id} may read this store but not push to it")
    policy = policy_for(info.kind, load_filters())
    decode = None
    if info.encrypted:  # pushed blobs are ciphertext (a keyed clone's clean filter): check the plaintext
        try:
            decode = Gitmem.open(push.home).codec_for(info).decode
        except GitmemError as exc:
            raise Refused(
                f"memory store {info.id} is encrypted and its key cannot be loaded here"
                f" ({exc.message}); write to it through the API"
            ) from None
    return catalog, info, policy, decode, user.name


def pre_receive(
    lines: list[str], env: Mapping[str, str], git_dir: Path, *, clock: Callable[[], dt.datetime] | None = None
) -> list[str]:
    """Check a push; return the refusals (empty: accepted, and the push's record is spooled)."""
    push = PushEnv.from_env(env, git_dir)
    updates = [line.split() for line in lines if line.strip()]
    try:
        if push.access != "read_write":
            raise Refused("this credential may read this memory store but not push to it")
        if not ids.has_prefix(push.user_id, ids.USER):
            raise Refused("pushes are attributed to a gitmem user (GITMEM_USER_ID); push through the gitmem server")
        catalog, info, policy, decode, user_name = _store_and_policy(push)
        if len(updates) != 1 or any(len(u) != 3 for u in updates):
            bad = [u[2] for u in updates if len(u) == 3 and u[2] != repository.MAIN]
            raise Refused(f"only {repository.MAIN} may be pushed" + (f" (not {', '.join(bad)})" if bad else ""))
        old, new, ref = updates[0]
        if ref != repository.MAIN:
            raise Refused(f"only {repository.MAIN} may be pushed (not {ref})")
        if new == ZERO:
            raise Refused("main cannot be deleted")
        repo = open_repo(push.git_dir, env)
        tip = repository.read_tip(repo)
        if (str(tip) if tip else ZERO) != old:
            raise Refused("main moved while you pushed; fetch, rebase and push again")
        if old != ZERO and not repo.descendant_of(new, old):
            raise Refused(
                "non-fast-forward pushes are refused: history cannot be rewritten by a push;"
                " fetch, rebase and push again"
            )
        index = StoreIndex(repo, database_url=database_setting(), store_id=push.store_id)
        try:
            indexed = index.catch_up()
            if (str(indexed) if indexed else ZERO) != old:
                raise Refused("main moved while you pushed; fetch, rebase and push again")
            notes = NoteState((n.path, n.memory_id, n.size) for n in index.all_notes())
        finally:
            index.close()
    except Refused as refused:
        return [str(refused)]
    now = (clock or (lambda: dt.datetime.now(dt.UTC)))()
    verdict = PushCheck(repo, info, policy, push.user_id, decode, now, user_name).run(old, new, notes)
    if verdict.reasons:
        return verdict.reasons
    write_spool(repo, push, old, new, verdict)
    return []


def write_spool(repo: pygit2.Repository, push: PushEnv, old: str, new: str, verdict: Verdict) -> Path:
    folder = pushes.spool_dir(repo)
    folder.mkdir(parents=True, exist_ok=True)
    spool = folder / f"{new}.json"
    data = {
        "store_id": push.store_id,
        "user_id": push.user_id,
        "ref": repository.MAIN,
        "old": old,
        "new": new,
        "created_at": next(iter(verdict.records.values()))["created_at"] if verdict.records else None,
        "commits": verdict.commits,
        "records": verdict.records,
    }
    tmp = spool.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "w") as handle:
        json.dump(data, handle, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, spool)
    return spool


# -- post-receive ---------------------------------------------------------------------------------


def _note_text(record: Mapping[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"


def write_notes(repo: pygit2.Repository, records: Mapping[str, Mapping[str, Any]]) -> pygit2.Oid | None:
    """Add one note per commit on ``refs/notes/gitmem`` in one notes commit, swapped in with a CAS."""
    if not records:
        return None
    blobs = {commit_id: repo.create_blob(_note_text(record).encode()) for commit_id, record in records.items()}
    for _attempt in range(NOTES_CAS_ATTEMPTS):
        ref = repo.references.get(repository.NOTES_REF)
        old = repository.direct_target(ref) if ref is not None else None
        base = repo[old].tree if old is not None else None
        tree = repository.tree_with(repo, base, blobs)
        now = int(time.time())
        sig = pygit2.Signature(*NOTES_AUTHOR, now, 0)
        subject = f"Notes added by gitmem for {len(records)} pushed commit{'s' if len(records) > 1 else ''}"
        commit = repo.create_commit(None, sig, sig, subject + "\n", tree, [old] if old is not None else [])
        if repository.compare_and_swap(repo, old, commit, ref=repository.NOTES_REF):
            return commit
    raise GitmemError("refs/notes/gitmem kept changing; the push notes were not written")


def settle_spool(repo: pygit2.Repository, *, stale_after: float = STALE_SPOOL_SECONDS) -> int:
    """Write the notes of every spooled push that reached main, then drop its spool; drop spools of
    pushes that never landed once they are old. Returns how many spools were settled."""
    folder = pushes.spool_dir(repo)
    if not folder.is_dir():
        return 0
    tip = repository.read_tip(repo)
    settled = 0
    for spool in sorted(folder.glob("*.json")):
        try:
            data = json.loads(spool.read_text())
        except (OSError, ValueError):
            continue
        new = str(data.get("new", ""))
        landed = tip is not None and new and (str(tip) == new or _is_ancestor(repo, new, tip))
        if landed:
            missing = {c: r for c, r in data.get("records", {}).items() if _note(repo, c) is None}
            write_notes(repo, missing)
        elif time.time() - spool.stat().st_mtime < stale_after:
            continue  # a push still under way (or one that failed a moment ago)
        spool.unlink(missing_ok=True)
        settled += 1
    for tmp in folder.glob("*.tmp*"):
        if time.time() - tmp.stat().st_mtime > stale_after:
            tmp.unlink(missing_ok=True)
    return settled


def _is_ancestor(repo: pygit2.Repository, commit_id: str, tip: pygit2.Oid) -> bool:
    try:
        return repo.descendant_of(tip, commit_id)
    except (KeyError, ValueError, pygit2.GitError):
        return False


def _note(repo: pygit2.Repository, commit_id: str) -> pygit2.Note | None:
    try:
        return repo.lookup_note(commit_id, repository.NOTES_REF)
    except KeyError:
        return None


def post_receive(lines: list[str], env: Mapping[str, str], git_dir: Path) -> list[str]:
    """Record the accepted push as Git notes, bring the index up to date; return warnings."""
    warnings: list[str] = []
    repo = pygit2.Repository(str(git_dir))
    try:
        settle_spool(repo, stale_after=STALE_SPOOL_SECONDS)
    except Exception as exc:  # the push has landed; never fail it here
        log.exception("post-receive could not record the push")
        warnings.append(f"the push landed but its notes were not written yet ({exc}); the index uses the spool")
    index = StoreIndex(repo, database_url=database_setting(), store_id=PushEnv.from_env(env, git_dir).store_id)
    try:
        index.catch_up()
    except Exception as exc:
        log.exception("post-receive could not update the index")
        warnings.append(f"the index will catch up on the next read ({exc})")
    finally:
        index.close()
    _report_to_webhooks(env)
    return warnings


def _report_to_webhooks(env: Mapping[str, str]) -> None:
    """The pushed versions into the webhook outbox now (the server's catch-up scan would find them later)."""
    home, store_id = env.get("GITMEM_HOME"), env.get("GITMEM_STORE_ID")
    if not home or not store_id:
        return
    try:
        from gitmem.engine.home import Gitmem
        from gitmem.engine.webhooks import webhooks_for

        gm = Gitmem.open(home)
        workspace_id = gm.catalog.store(store_id).workspace_id
        webhooks_for(gm).notes_changed(gm.store(workspace_id, store_id), workspace_id)
    except Exception:  # the push has landed; the catch-up scan reports it
        log.exception("post-receive could not report the push to webhooks")


# -- entry point ----------------------------------------------------------------------------------


def main(argv: list[str], stdin: TextIO = sys.stdin, stderr: TextIO = sys.stderr) -> int:
    if len(argv) != 1 or argv[0] not in ("pre-receive", "post-receive"):
        print("usage: python -m gitmem.engine.receive pre-receive|post-receive", file=stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="gitmem: %(levelname)s %(name)s: %(message)s", stream=stderr)
    lines = stdin.read().splitlines()
    try:
        repository.set_fsync(fsync_setting())
    except GitmemError:
        repository.set_fsync(True)
    git_dir = Path(os.environ.get("GIT_DIR") or ".")
    if argv[0] == "pre-receive":
        try:
            reasons = pre_receive(lines, os.environ, git_dir)
        except Exception as exc:  # a bug must refuse the push, never let it through unchecked
            log.exception("pre-receive failed")
            reasons = [f"the push could not be checked ({type(exc).__name__}: {exc})"]
        for reason in reasons[:MAX_REASONS]:
            print(f"gitmem: refused: {reason}", file=stderr)
        if reasons:
            fix = (
                "; fix those commits (git rebase -i) and push again"
                if any(_COMMIT_REASON.match(r) for r in reasons)
                else ""
            )
            print(f"gitmem: the store is unchanged{fix}", file=stderr)
        return 1 if reasons else 0
    for warning in post_receive(lines, os.environ, git_dir):
        print(f"gitmem: warning: {warning}", file=stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
