"""The one exception hierarchy. Each error knows its API ``type`` and HTTP status.

``api/errors.py`` maps these to the wire envelope in exactly one place; the CLI prints ``message``.
"""

from __future__ import annotations

import errno
import functools
import shutil
import sqlite3
from pathlib import Path
from typing import Any


class GitmemError(Exception):
    """Base of every refusal or failure the engine reports."""

    api_type = "api_error"
    status = 500
    retryable = False

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidRequest(GitmemError):
    api_type = "invalid_request_error"
    status = 400


class SecretRefused(InvalidRequest):
    """Content that holds a password, private key or access token."""


class SearchTooCostly(InvalidRequest):
    """A search past the bounds of the work one query may cause: too many terms or prefixes, a prefix
    too short, or over the engine's time budget (docs/search.md)."""


class ArchivedStore(InvalidRequest):
    """A write to an archived store."""


class LimitExceeded(InvalidRequest):
    """A count or size limit (notes in a store, shared stores in a workspace, a bank's caps)."""


class AuthenticationFailed(GitmemError):
    api_type = "authentication_error"
    status = 401


class PermissionDenied(GitmemError):
    api_type = "permission_error"
    status = 403


class NotFound(GitmemError):
    api_type = "not_found_error"
    status = 404


class Conflict(GitmemError):
    api_type = "conflict_error"
    status = 409


class PathConflict(Conflict):
    """A note at, above or below an existing note's path."""

    api_type = "memory_path_conflict_error"

    def __init__(self, message: str, *, conflicting_memory_id: str, conflicting_path: str) -> None:
        super().__init__(message, conflicting_memory_id=conflicting_memory_id, conflicting_path=conflicting_path)


class PreconditionFailed(Conflict):
    api_type = "memory_precondition_failed_error"


class StoreBusy(Conflict):
    """The store's lock could not be taken in time; a retry may succeed."""

    retryable = True


class RewriteFailed(GitmemError):
    """A history rewrite could not be made safely; the store is unchanged."""


class TooLarge(GitmemError):
    api_type = "request_too_large"
    status = 413


class RateLimited(GitmemError):
    api_type = "rate_limit_error"
    status = 429
    retryable = True

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(GitmemError):
    """A dependency the request needs (the catalog's PostgreSQL) cannot be reached now; a retry after
    ``retry_after`` seconds may succeed. Whatever was acknowledged before stays."""

    api_type = "api_error"
    status = 503
    retryable = True

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class InsufficientStorage(GitmemError):
    """The server's disk (or quota) is full: nothing was written, and a retry after space is freed
    will succeed."""

    api_type = "api_error"
    status = 507
    retryable = True


@functools.cache
def storage_errors() -> tuple[type[Exception], ...]:
    """What a write can raise when the disk is full: the OS, SQLite and libgit2 each report it their way.
    A function, so that naming an error does not load libgit2: Git's encryption filter imports this
    module in a process of its own per file, where pygit2 would be half of its start-up."""
    import pygit2

    return (OSError, sqlite3.Error, pygit2.GitError)


_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
_NEARLY_FULL_BYTES = 1 << 20


def _nearly_full(where: Path) -> bool:
    try:
        return shutil.disk_usage(where).free < _NEARLY_FULL_BYTES
    except OSError:
        return False


def as_insufficient_storage(exc: BaseException, where: Path | None = None) -> InsufficientStorage | None:
    """The refusal to report for ``exc`` if it comes from a full disk or quota, else ``None``. libgit2
    does not always say why a write failed ("no error"), so a storage error while the file system
    holding ``where`` is nearly full counts as one too."""
    full = (
        (isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS)
        or (isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL)
        or "no space left on device" in str(exc).lower()
        or "disk quota exceeded" in str(exc).lower()
        or (where is not None and isinstance(exc, storage_errors()) and _nearly_full(where))
    )
    if not full:
        return None
    return InsufficientStorage(
        "insufficient storage: the server's disk is full; nothing was written. Retry after space is freed"
    )
