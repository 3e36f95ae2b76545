"""The push hooks' engine: what ``hooks/pre-receive`` and ``hooks/post-receive`` run (docs/architecture.md).

``gitmem hook pre-receive|post-receive`` inside ``git receive-pack``, with ``<old> <new>
<ref>`` lines on standard input and the pusher in the environment the server gives ``git http-backend``:

==================  ==============================================================================
``GITMEM_USER_ID``  the pusher (``user_...``); every pushed change becomes a version by this user
``GITMEM_ACCESS``   ``read_write`` (anything else is refused)
``GITMEM_STORE_ID`` the store (default: the repository's directory name)
``GITMEM_HOME``     the data home (default: two levels above the repository)
``GITMEM_PYTHON``   the interpreter the hook scripts run gitmem with
==================  ==============================================================================

The rest of the server's settings reach the hooks as :class:`PushOptions`, built where the hook
starts (``gitmem hook``: :func:`gitmem.config.home.push_options`): the same content filters, the index's
database, and the home as the server opens it.

pre-receive runs while the pushed objects sit in Git's quarantine (``GIT_QUARANTINE_PATH``; libgit2
ignores ``GIT_OBJECT_DIRECTORY``, so the quarantine is added as an alternate). It accepts only a
fast-forward of ``refs/heads/main`` made of single-parent commits, and replays every pushed commit
against the notes the store holds, applying every rule of section 5 to every change. A refusal is
printed as ``gitmem: refused: <commit> <path>: <reason>`` (Git shows it behind ``remote:``) and
leaves the store exactly as it was. On success it spools the push's record (pusher, time, the versions
each commit makes) to ``gitmem/pushes/<new>.json``.

post-receive turns the spool into Git notes on ``refs/notes/gitmem`` (a compare-and-swap, so it never
loses a note written concurrently), brings the index up to date and deletes the spool. Until then the
index reads the spool (:func:`gitmem.git.pushes.read_push_record`), so attribution never depends on timing.

The checks of each commit are :mod:`gitmem.engine.push.check`'s; the spool and the notes are
:mod:`gitmem.engine.push.notes`'s.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TextIO

import pygit2

from gitmem import ids
from gitmem.durable import DURABLE, Durability
from gitmem.engine.catalog.catalog import Catalog
from gitmem.engine.index.store_index import StoreIndex
from gitmem.engine.push.notes import STALE_SPOOL_SECONDS, settle_spool, write_spool
from gitmem.errors import GitmemError, NotFound
from gitmem.git import repository

if TYPE_CHECKING:
    from gitmem.db import Database
    from gitmem.engine.gitmem import Gitmem
    from gitmem.git import pushes
    from gitmem.git.signing import Signer
    from gitmem.model import StoreInfo
    from gitmem.rules.filters import FilterChain
    from gitmem.rules.policy import StorePolicy

log = logging.getLogger(__name__)

_COMMIT_REASON = re.compile(r"[0-9a-f]{7}[ :]")


class Refused(Exception):
    """The push as a whole is refused (before any commit is looked at)."""


@dataclass(frozen=True)
class PushOptions:
    """What a push hook runs with, from the server's settings (see the module's docstring)."""

    database_url: str | None
    filters: Callable[[], FilterChain]  # loaded by pre-receive alone: post-receive checks nothing
    open_home: Callable[[Path], Gitmem]  # the home, as the server opens it (its key, its listeners)
    signer: Callable[[Path], Signer]  # the home's signing key, for the push's record on refs/notes/gitmem
    # Whether a listener of the home may want news of a workspace's notes (a webhook subscribed to
    # them), asked of the catalog before the home is opened for it: most pushes have none to tell.
    listening: Callable[[Database, str], bool]
    durability: Durability = DURABLE  # the home's GITMEM_FSYNC, for that record's objects and ref


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


def open_repo(git_dir: Path, env: Mapping[str, str]) -> pygit2.Repository:
    """The store as receive-pack sees it: with the quarantined objects of the push, if any."""
    repo = pygit2.Repository(str(git_dir))
    quarantine = env.get("GIT_QUARANTINE_PATH") or ""
    if quarantine and Path(quarantine).is_dir():
        repo.odb.add_disk_alternate(quarantine)
    return repo


# -- pre-receive ----------------------------------------------------------------------------------


def _store_and_policy(
    push: PushEnv, options: PushOptions
) -> tuple[Catalog, StoreInfo, StorePolicy, pushes.Decode | None, str]:
    from gitmem.rules.policy import policy_for  # with the filters' rules: not for post-receive

    url = options.database_url
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
    policy = policy_for(info.kind, options.filters())
    decode = None
    if info.encrypted:  # pushed blobs are ciphertext (a keyed clone's clean filter): check the plaintext
        try:
            decode = options.open_home(push.home).codec_for(info).decode  # its key ring
        except GitmemError as exc:
            raise Refused(
                f"memory store {info.id} is encrypted and its key cannot be loaded here"
                f" ({exc.message}); write to it through the API"
            ) from None
    return catalog, info, policy, decode, user.name


def pre_receive(
    lines: list[str],
    env: Mapping[str, str],
    git_dir: Path,
    options: PushOptions,
    *,
    clock: Callable[[], dt.datetime] | None = None,
) -> list[str]:
    """Check a push; return the refusals (empty: accepted, and the push's record is spooled)."""
    from gitmem.engine.catalog.user_emails import UserEmails
    from gitmem.engine.push.check import ZERO, NoteState, PushCheck  # the checks: not for post-receive

    push = PushEnv.from_env(env, git_dir)
    updates = [line.split() for line in lines if line.strip()]
    try:
        if push.access != "read_write":
            raise Refused("this credential may read this memory store but not push to it")
        if not ids.has_prefix(push.user_id, ids.USER):
            raise Refused("pushes are attributed to a gitmem user (GITMEM_USER_ID); push through the gitmem server")
        catalog, info, policy, decode, user_name = _store_and_policy(push, options)
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
        index = StoreIndex(repo, database_url=options.database_url, store_id=push.store_id)
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
    emails = frozenset(UserEmails(catalog).of_user(push.user_id))
    verdict = PushCheck(repo, info, policy, push.user_id, decode, now, user_name, emails).run(old, new, notes)
    if verdict.reasons:
        return verdict.reasons
    write_spool(repo, push.store_id, push.user_id, old, new, verdict)
    return []


# -- post-receive ---------------------------------------------------------------------------------


def post_receive(lines: list[str], env: Mapping[str, str], git_dir: Path, options: PushOptions) -> list[str]:  # noqa: ARG001  what Git hands every post-receive hook, pre_receive's signature
    """Record the accepted push as Git notes, bring the index up to date; return warnings."""
    warnings: list[str] = []
    repo = repository.open_repository(git_dir, options.durability)
    try:
        signer = options.signer(PushEnv.from_env(env, git_dir).home)
        settle_spool(repo, signer, stale_after=STALE_SPOOL_SECONDS, durability=options.durability)
    except Exception as exc:  # the push has landed; never fail it here
        log.exception("post-receive could not record the push")
        warnings.append(f"the push landed but its notes were not written yet ({exc}); the index uses the spool")
    index = StoreIndex(repo, database_url=options.database_url, store_id=PushEnv.from_env(env, git_dir).store_id)
    try:
        index.catch_up()
    except Exception as exc:
        log.exception("post-receive could not update the index")
        warnings.append(f"the index will catch up on the next read ({exc})")
    finally:
        index.close()
    _tell_listeners(env, options)
    return warnings


def _tell_listeners(env: Mapping[str, str], options: PushOptions) -> None:
    """The home's listeners (the webhooks' outbox) told of the pushed versions now (the server's
    catch-up scan would find them later). The home is opened for it only if one may want them: the
    outbox asks the same first, and writes nothing (no watermark) for a workspace nobody listens to."""
    home, store_id = env.get("GITMEM_HOME"), env.get("GITMEM_STORE_ID")
    if not home or not store_id:
        return
    try:
        catalog = Catalog.for_home(Path(home), options.database_url)
        try:
            workspace_id = catalog.store(store_id).workspace_id
            if not options.listening(catalog.db, workspace_id):
                return
        finally:
            catalog.close()
        gm = options.open_home(Path(home))
        gm.tell_notes_changed(gm.store(workspace_id, store_id), workspace_id)
    except Exception:  # the push has landed; the catch-up scan reports it
        log.exception("post-receive could not report the push to the home's listeners")


# -- entry point ----------------------------------------------------------------------------------


def run_hook(
    hook: Literal["pre-receive", "post-receive"], stdin: TextIO, stderr: TextIO, options: Callable[[], PushOptions]
) -> int:
    """One run of a push hook (``gitmem hook pre-receive|post-receive``); returns its exit status.
    ``options`` reads the settings: a bad one refuses the push, never lets it through unchecked."""
    logging.basicConfig(
        level=logging.WARNING, format="gitmem: %(levelname)s %(name)s: %(message)s", stream=stderr, force=True
    )
    lines = stdin.read().splitlines()
    git_dir = Path(os.environ.get("GIT_DIR") or ".")
    if hook == "pre-receive":
        from gitmem.engine.push.check import MAX_REASONS

        try:
            reasons = pre_receive(lines, os.environ, git_dir, options())
        except GitmemError as exc:  # a bad setting
            reasons = [exc.message]
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
    try:
        settings = options()
    except GitmemError as exc:  # cannot happen after pre-receive read the same settings; say so if it does
        print(f"gitmem: warning: {exc.message}", file=stderr)
        return 0
    for warning in post_receive(lines, os.environ, git_dir, settings):
        print(f"gitmem: warning: {warning}", file=stderr)
    return 0
