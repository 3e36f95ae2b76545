"""The facade over one data home: the catalog plus a bare repository per store.

``$GITMEM_HOME/stores/<memstore_id>.git`` and the catalog, in ``$GITMEM_HOME/catalog.sqlite3`` or in
PostgreSQL (``GITMEM_DATABASE``; docs/architecture.md). Nothing here assumes one process: every process
(every node, on PostgreSQL) opens the same home and coordinates through the database's transactions and
locks and Git's own.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Self

from gitmem import durable, ids
from gitmem.clock import Clock, system_clock, to_micros
from gitmem.config import handoff as checked_settings
from gitmem.crypto.codec import ContentCodec, PlainCodec
from gitmem.crypto.keyring import KeyRing
from gitmem.crypto.master_key import load_master_key
from gitmem.db import Database
from gitmem.db.migrations import Migration
from gitmem.db.page_tokens import PageTokens, tokens_for
from gitmem.engine.catalog.catalog import Catalog
from gitmem.engine.index.search import forget_store as forget_search_text
from gitmem.engine.store.store import MemoryStore, check_limit
from gitmem.errors import ArchivedStore, Conflict, NotFound
from gitmem.git import repository
from gitmem.model import Page, StoreInfo, StoreKind
from gitmem.rules.filters import FilterChain, load_filters
from gitmem.rules.policy import MAX_SHARED_STORES, check_store_fields, policy_for

if TYPE_CHECKING:
    from gitmem.webhooks.outbox import Webhooks

log = logging.getLogger(__name__)

MAX_STORES_PAGE = 100  # stores a page of a listing


def default_home() -> Path:
    """``GITMEM_HOME``, else ``$XDG_DATA_HOME/gitmem``."""
    configured = checked_settings.home()
    if configured is not None:
        return configured
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "gitmem"


class HomeTables:
    """Base of an engine concept that keeps its own tables in the catalog (tasks, profiles): one
    instance a data home (:meth:`of`), its tables made (migrated) on first use."""

    MIGRATIONS: ClassVar[tuple[Migration, ...]] = ()

    def __init__(self, gm: Gitmem) -> None:
        self.gm = gm
        self.catalog = gm.catalog
        self.catalog.ensure_schema(self.MIGRATIONS)

    @classmethod
    def of(cls, gm: Gitmem) -> Self:
        found = gm._services.get(cls)
        if found is None:
            # Made outside the lock: making one migrates its tables, which waits for the database's
            # write lock, and a thread holding that lock may be asking for another service meanwhile.
            # Two threads may each make one; the first kept wins (migrations apply once either way).
            made = cls(gm)
            with gm._services_lock:
                found = gm._services.setdefault(cls, made)
        return found  # type: ignore[return-value]

    @property
    def db(self) -> Database:
        return self.catalog.db

    def _now(self) -> int:
        return to_micros(self.gm.clock())


class Gitmem:
    def __init__(
        self,
        home: Path,
        *,
        clock: Clock = system_clock,
        filters: FilterChain | None = None,
        fsync: bool | None = None,
        database: str | None = None,
    ) -> None:
        """``database``: a ``postgresql://`` URL for the catalog; ``""`` for SQLite in the home whatever
        the environment says; ``None`` (the default) for ``GITMEM_DATABASE``, SQLite if it is unset."""
        self.home = home
        self.clock = clock
        self.filters = filters or load_filters()
        home.mkdir(parents=True, exist_ok=True)
        (home / "stores").mkdir(exist_ok=True)
        repository.set_fsync(checked_settings.fsync() if fsync is None else fsync)
        durable.use_file_system_flushes(checked_settings.flush_file_systems())
        self.catalog = Catalog.for_home(
            home, checked_settings.database_url() if database is None else database or None, clock
        )
        self._local = threading.local()
        self._keyring: KeyRing | None = None
        self._services: dict[type, HomeTables] = {}
        self._services_lock = threading.Lock()
        self._opened: set[str] = set()  # stores opened by some thread of this process (see opened_before)

    @classmethod
    def open(cls, home: Path | str | None = None, **kwargs: object) -> Gitmem:
        return cls(Path(home) if home is not None else default_home(), **kwargs)  # type: ignore[arg-type]

    @property
    def database(self) -> Database:
        """The database the catalog lives in (for the stores' indexes too, on PostgreSQL)."""
        return self.catalog.db

    @property
    def index_database_url(self) -> str | None:
        """Where the stores' indexes live: the catalog's PostgreSQL, or ``None`` for a SQLite file in
        each repository."""
        return getattr(self.database, "url", None) if self.database.dialect == "postgresql" else None

    def close(self) -> None:
        """Close this thread's stores and the database's connections (the pool, on PostgreSQL)."""
        for store_id in list(self._local.__dict__.get("stores", {})):
            self._forget(store_id)
        self.catalog.close()

    @property
    def keyring(self) -> KeyRing:
        """Data keys for encrypted stores, wrapped by the master key (made on first use only)."""
        if self._keyring is None:
            self._keyring = KeyRing(self.home / "keys.json", load_master_key(self.home), clock=self.clock)
        return self._keyring

    @property
    def page_tokens(self) -> PageTokens:
        """The codec of the catalog's listings (stores, workers, tasks, dreams)."""
        return tokens_for(self.home)

    def codec_for(self, info: StoreInfo) -> ContentCodec:
        """Each encrypted store has its own data key (owner = the store), so deleting the store, or
        the profile whose bank it is, destroys exactly that key."""
        return self.keyring.codec(info.id, info.id) if info.encrypted else PlainCodec()

    def repo_path(self, store_id: str) -> Path:
        if not ids.has_prefix(store_id, ids.STORE) or "/" in store_id or ".." in store_id:
            raise NotFound(f"memory store {store_id} not found")
        return self.home / "stores" / f"{store_id}.git"

    # -- stores -----------------------------------------------------------------------------------

    def create_store(
        self,
        workspace_id: str,
        name: str,
        description: str = "",
        metadata: dict[str, str] | None = None,
        kind: StoreKind = "shared",
        encrypted: bool = False,
    ) -> StoreInfo:
        metadata = dict(metadata or {})
        check_store_fields(name, description, metadata)
        self.catalog.workspace(workspace_id)
        store_id = ids.new_id(ids.STORE)
        try:  # a failure anywhere (a full disk) leaves no half-made folder behind
            repository.init_bare(self.repo_path(store_id))
            if encrypted:
                self.keyring.ensure(store_id)
            return self.catalog.insert_store(
                workspace_id, store_id, name, description or "", metadata, kind, encrypted, MAX_SHARED_STORES
            )
        except BaseException:
            shutil.rmtree(self.repo_path(store_id), ignore_errors=True)
            raise

    def get_store(self, workspace_id: str, store_id: str) -> StoreInfo:
        info = self.catalog.store(store_id) if ids.has_prefix(store_id, ids.STORE) else None
        if info is None or info.workspace_id != workspace_id:
            raise NotFound(f"memory store {store_id} not found")
        return info

    def list_stores(
        self,
        workspace_id: str,
        include_archived: bool = False,
        created_gte: dt.datetime | None = None,
        created_lte: dt.datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Page[StoreInfo]:
        check_limit(limit, MAX_STORES_PAGE, full=False)
        after = tuple(self.page_tokens.decode(page, "stores", int, str)) if page else None
        rows = self.catalog.list_stores(
            workspace_id,
            include_archived=include_archived,
            created_gte=created_gte,
            created_lte=created_lte,
            after=after,
            limit=limit + 1,
        )
        if len(rows) <= limit:
            return Page(rows, None)
        last = rows[limit - 1]
        return Page(rows[:limit], self.page_tokens.encode("stores", to_micros(last.created_at), last.id))

    def update_store(
        self,
        workspace_id: str,
        store_id: str,
        name: str | None = None,
        description: str | None = None,
        metadata_patch: dict[str, str | None] | None = None,
    ) -> StoreInfo:
        info = self.get_store(workspace_id, store_id)
        if info.archived_at is not None:
            raise ArchivedStore(f"memory store {store_id} is archived and can only be read")
        fields: dict[str, object] = {}
        metadata = None
        if metadata_patch is not None:
            metadata = dict(info.metadata)
            for key, value in metadata_patch.items():
                if value is None:
                    metadata.pop(key, None)
                else:
                    metadata[key] = value
            fields["metadata"] = metadata
        check_store_fields(name, description, metadata)
        if name is not None:
            fields["name"] = name
        if description is not None:
            fields["description"] = description
        if not fields:
            return info
        return self.catalog.update_store(store_id, **fields)

    def archive_store(self, workspace_id: str, store_id: str) -> StoreInfo:
        info = self.get_store(workspace_id, store_id)
        if info.kind == "worker":
            raise Conflict("a worker's own store cannot be archived")
        return self.catalog.archive_store(store_id)

    def delete_store(self, workspace_id: str, store_id: str, *, force: bool = False) -> None:
        info = self.get_store(workspace_id, store_id)
        if info.kind == "worker" and not force:
            raise Conflict("a worker's own store cannot be deleted")
        self.catalog.delete_store(store_id)
        self.remove_store_files(info)

    def remove_store_files(self, info: StoreInfo) -> None:
        """What a store leaves once its catalog row is gone: repository, index, key."""
        self._forget(info.id)
        forget_search_text(self.repo_path(info.id))
        self._drop_index(info.id)
        shutil.rmtree(self.repo_path(info.id), ignore_errors=True)
        if info.encrypted:
            self.keyring.destroy(info.id)

    def _drop_index(self, store_id: str) -> None:
        """A deleted store's index in PostgreSQL (a SQLite index goes with its repository)."""
        url = self.index_database_url
        if url is not None and self.repo_path(store_id).exists():
            from gitmem.engine.index.postgres_schema import PgIndexDb

            PgIndexDb(url, store_id).drop()

    def store(self, workspace_id: str, store_id: str, *, info: StoreInfo | None = None) -> MemoryStore:
        """The store's notes and versions. One object per thread, reused (pygit2 and sqlite3 objects
        must not cross threads). ``info``: the store's catalog row as the caller has just read it
        for ``workspace_id`` (an access check), not read again."""
        if info is None or info.id != store_id or info.workspace_id != workspace_id:
            info = self.get_store(workspace_id, store_id)
        cache: dict[str, MemoryStore] = self._local.__dict__.setdefault("stores", {})
        store = cache.get(store_id)
        if store is not None and info.encrypted and self._rotated_since(store):
            store = None  # `gitmem keys rotate` ran in another process: write with the new key
        if store is None or not store.path.exists():
            store = MemoryStore(
                self.repo_path(store_id),
                store_id,
                policy=policy_for(info.kind, self.filters),
                codec=self.codec_for(info),
                clock=self.clock,
                write_guard=lambda: self._check_writable(store_id),
                on_commit=lambda s: self._webhooks().notes_changed(s, info.workspace_id),
                on_redact=lambda s, v: self._webhooks().version_redacted(s, info.workspace_id, v),
                database_url=self.index_database_url,
            )
            cache[store_id] = store
            self._opened.add(store_id)
        return store

    def opened_before(self, store_id: str) -> bool:
        """Whether a thread of this process has opened the store: opening it again then only reads
        (a first open may make the index's tables, and wait for another writer to do so)."""
        return store_id in self._opened

    def _webhooks(self) -> Webhooks:
        """The event outbox: each store tells it of its changes right after they land."""
        from gitmem.webhooks.outbox import webhooks_for

        return webhooks_for(self)

    def _rotated_since(self, store: MemoryStore) -> bool:
        return getattr(store.codec, "key_id", None) != self.keyring.current(store.id).key_id

    def _check_writable(self, store_id: str) -> None:
        info = self.catalog.cache.get("store", store_id, lambda: self.catalog.store(store_id))
        if info.archived_at is not None:
            raise ArchivedStore(
                f"memory store {store_id} is archived; its notes can be read and deleted, not created or changed"
            )

    def _forget(self, store_id: str) -> None:
        self._opened.discard(store_id)
        cache = self._local.__dict__.get("stores", {})
        store = cache.pop(store_id, None)
        if store is not None:
            store.close()

    def all_stores(self) -> list[StoreInfo]:
        from gitmem.engine.catalog.catalog import store_info

        return [store_info(r) for r in self.catalog.db.execute("SELECT * FROM stores ORDER BY created_at")]
