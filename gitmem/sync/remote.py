"""How a mount talks to a note service: the ``Remote`` protocol, its errors, and
:class:`MemoryStoreRemote` over the official ``anthropic`` SDK.

A mount talks to its store only through a :class:`Remote`, so any note service that can list, read,
create, update and delete can be mounted. Paths are always the store form, ``/a/b.md``; a remote whose
service uses other paths (a profile bank's ``a/b.md``) maps them itself.

``validate_path(path) -> None``
    Raise ``ValueError`` (with a reason) if the service would refuse the path. Checked before a local file
    is sent, so a refused name is logged once and not retried.
``list_all(*, with_content=False) -> {path: RemoteEntry}``
    Every note: ``memory_id``, ``path``, ``sha256`` (hex SHA-256 of the UTF-8 content), ``etag`` (the
    service's version tag, e.g. the Git blob id, or ``None``) and, when ``with_content`` and the service
    can list text cheaply, ``content`` (else ``None``; the mount then calls ``read``). Called at start with
    ``with_content=True`` and on every poll with ``False``, so it should be cheap.
``read(memory_id) -> RemoteEntry``
    One note, ``content`` set.
``create(path, content) -> RemoteEntry``
``update(memory_id, *, content=None, path=None, expected_sha256=None) -> RemoteEntry``
    ``path`` renames. The answer's ``memory_id`` is the one the mount keeps from then on, so a service
    that identifies notes by path returns the new path as the id after a rename.
``delete(memory_id, *, expected_sha256=None) -> None``

Failures are the :class:`RemoteError` subclasses: :class:`RemotePreconditionFailed` (the note is no
longer at ``expected_sha256``), :class:`RemoteNotFound`, :class:`RemotePathConflict` (a note at, above or
below that path exists), :class:`RemoteRefused` (invalid, too large, forbidden: not worth retrying) and
:class:`RemoteUnavailable` (network, 429, 5xx: retried later). :class:`MemoryStoreRemote` implements the
protocol over the official ``anthropic`` SDK (``client.beta.memory_stores.memories``).

A profile bank (``/v1/profiles/{id}/memories``) plugs in as a ``BankRemote`` with
``memory_id = path``: ``list_all`` from ``GET .../memories`` (``content_hash`` as ``sha256``), ``read``
from ``GET .../memories/content?path=``, ``create``/``update`` as ``PUT .../memories/content?path=``
(a rename is a PUT of the new path and a DELETE of the old, answering the new path as the id),
``delete`` as ``DELETE ...?path=``, ``validate_path`` with :func:`gitmem.rules.paths.validate_bank_path` on the
path without its leading ``/``, preconditions checked against the listed hash until the bank API takes
them, and ``Mount(..., clean=True)``.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from gitmem.errors import GitmemError
from gitmem.rules.paths import validate_store_path

if TYPE_CHECKING:
    import anthropic
    from anthropic.types.beta.memory_stores import BetaManagedAgentsMemory


# -- the Remote protocol ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteEntry:
    memory_id: str
    path: str
    sha256: str
    etag: str | None = None
    content: str | None = None


class RemoteError(GitmemError):
    """A store answered a mount's request with a refusal or not at all."""


class RemotePreconditionFailed(RemoteError):
    """The note no longer has the expected content."""


class RemoteNotFound(RemoteError):
    """The note (or the store) does not exist."""


class RemotePathConflict(RemoteError):
    """A note already exists at, above or below the path."""

    def __init__(self, message: str, *, conflicting_path: str | None = None) -> None:
        super().__init__(message)
        self.conflicting_path = conflicting_path


class RemoteRefused(RemoteError):
    """Refused for good (invalid, too large, forbidden): retrying the same request will not help."""


class RemoteUnavailable(RemoteError):
    """Not answered (network, rate limit, server error): try again later."""


class Remote(Protocol):
    """What a mount needs from a store; see the module docstring for the contract."""

    def validate_path(self, path: str) -> None: ...

    def list_all(self, *, with_content: bool = False) -> dict[str, RemoteEntry]: ...

    def read(self, memory_id: str) -> RemoteEntry: ...

    def create(self, path: str, content: str) -> RemoteEntry: ...

    def update(
        self, memory_id: str, *, content: str | None = None, path: str | None = None, expected_sha256: str | None = None
    ) -> RemoteEntry: ...

    def delete(self, memory_id: str, *, expected_sha256: str | None = None) -> None: ...


def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


class MemoryStoreRemote:
    """A memory store over the official SDK: ``client.beta.memory_stores.memories``.

    Give the client a small ``max_retries``: the mount retries on its own schedule.
    """

    LIST_LIMIT = 1000  # notes a page in the basic view (the memory-store API)
    FULL_LIST_LIMIT = 20  # with view=full

    def __init__(self, client: anthropic.Anthropic, store_id: str) -> None:
        self.client = client
        self.store_id = store_id
        self._memories = client.beta.memory_stores.memories

    def validate_path(self, path: str) -> None:
        try:
            validate_store_path(path)
        except GitmemError as exc:
            raise ValueError(exc.message) from None

    def list_all(self, *, with_content: bool = False) -> dict[str, RemoteEntry]:
        view: Literal["basic", "full"] = "full" if with_content else "basic"
        limit = self.FULL_LIST_LIMIT if with_content else self.LIST_LIMIT
        out: dict[str, RemoteEntry] = {}
        with _translated():
            for listed in self._memories.list(self.store_id, view=view, limit=limit):
                if getattr(listed, "type", None) != "memory":
                    continue  # a folder (a path prefix), not a note
                item = cast("BetaManagedAgentsMemory", listed)
                out[item.path] = RemoteEntry(
                    item.id, item.path, item.content_sha256, None, item.content if with_content else None
                )
        return out

    def read(self, memory_id: str) -> RemoteEntry:
        with _translated():
            raw = self._memories.with_raw_response.retrieve(memory_id, memory_store_id=self.store_id, view="full")
            memory = raw.parse()
        return RemoteEntry(memory.id, memory.path, memory.content_sha256, _etag(raw.headers), memory.content or "")

    def create(self, path: str, content: str) -> RemoteEntry:
        with _translated():
            raw = self._memories.with_raw_response.create(self.store_id, path=path, content=content)
            memory = raw.parse()
        return RemoteEntry(memory.id, memory.path, memory.content_sha256, _etag(raw.headers), content)

    def update(
        self, memory_id: str, *, content: str | None = None, path: str | None = None, expected_sha256: str | None = None
    ) -> RemoteEntry:
        kwargs: dict[str, Any] = {}
        if content is not None:
            kwargs["content"] = content
        if path is not None:
            kwargs["path"] = path
        if expected_sha256 is not None:
            kwargs["precondition"] = {"type": "content_sha256", "content_sha256": expected_sha256}
        view: Literal["basic", "full"] = "basic" if content is not None else "full"
        with _translated():
            raw = self._memories.with_raw_response.update(memory_id, memory_store_id=self.store_id, view=view, **kwargs)
            memory = raw.parse()
        text = content if content is not None else memory.content
        return RemoteEntry(memory.id, memory.path, memory.content_sha256, _etag(raw.headers), text)

    def delete(self, memory_id: str, *, expected_sha256: str | None = None) -> None:
        kwargs: dict[str, Any] = {}
        if expected_sha256 is not None:
            kwargs["expected_content_sha256"] = expected_sha256
        with _translated():
            self._memories.delete(memory_id, memory_store_id=self.store_id, **kwargs)


def _etag(headers: Any) -> str | None:
    value = headers.get("etag")
    return value.strip('"') if value else None


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """SDK exceptions -> the Remote protocol's errors."""
    import anthropic

    try:
        yield
    except anthropic.APIStatusError as exc:
        body: dict[str, Any] = exc.body if isinstance(exc.body, dict) else {}
        error: dict[str, Any] = body["error"] if isinstance(body.get("error"), dict) else body
        error_type = error.get("type") if isinstance(error, dict) else None
        message = (error.get("message") if isinstance(error, dict) else None) or str(exc)
        status = exc.status_code
        if error_type == "memory_precondition_failed_error":
            raise RemotePreconditionFailed(message) from exc
        if error_type == "memory_path_conflict_error":
            raise RemotePathConflict(message, conflicting_path=error.get("conflicting_path")) from exc
        if status == 404:
            raise RemoteNotFound(message) from exc
        if status in (408, 409, 429) or status >= 500:
            raise RemoteUnavailable(message) from exc
        raise RemoteRefused(message) from exc
    except anthropic.APIConnectionError as exc:
        raise RemoteUnavailable(f"cannot reach the server: {exc}") from exc
