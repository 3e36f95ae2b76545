"""A data home, :class:`Gitmem`: the catalog plus a bare repository per store.

``HOME/stores/<memstore_id>.git`` and the catalog, in ``HOME/catalog.sqlite3`` or in PostgreSQL
(docs/architecture.md). Nothing here assumes one process: every process (every node, on PostgreSQL)
opens the same home and coordinates through the database's transactions and locks and Git's own.

A home is opened with its options as values (:meth:`Gitmem.open`); the settings that give them are
read where a program starts (:mod:`gitmem.config.home`), never here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import shutil
import threading
from pathlib import Path
from typing import ClassVar, Self

from gitmem import ids
from gitmem.clock import Clock, system_clock, to_micros
from gitmem.crypto.codec import ContentCodec, PlainCodec
from gitmem.crypto.keyring import KeyRing
from gitmem.crypto.master_key import MasterKeySource, load_master_key
from gitmem.crypto.signing_key import HomeSigner, SigningKeySource
from gitmem.db import Database
from gitmem.db.migrations import Migration
from gitmem.db.page_tokens import PageTokens, tokens_for
from gitmem.durable import Durability, FsyncMode
from gitmem.engine.catalog.catalog import Catalog
from gitmem.engine.change_listeners import ChangeListener, ChangeListeners
from gitmem.engine.index.search import SEARCH_BUDGET_SECONDS
from gitmem.engine.index.search import forget_store as forget_search_text
from gitmem.engine.open_stores import OpenStores, OpenStoreStats
from gitmem.engine.open_stores import leases as store_leases
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import ArchivedStore, Conflict, NotFound
from gitmem.git import repository
from gitmem.model import Page, StoreInfo, StoreKind
from gitmem.rules.filters import FilterChain
from gitmem.rules.paging import check_limit
from gitmem.rules.policy import MAX_SHARED_STORES, check_store_fields, policy_for

log = logging.getLogger(__name__)

MAX_STORES_PAGE = 100  # stores a page of a listing


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
    """One data home. Open it with :meth:`open`."""

    def __init__(
        self,
        home: Path,
        *,
        database: str | None = None,
        fsync: FsyncMode = "always",
        master_key: MasterKeySource | None = None,
        filters: FilterChain | None = None,
        clock: Clock = system_clock,
        search_budget: float = SEARCH_BUDGET_SECONDS,
        open_stores: int | None = None,
        signing_key: SigningKeySource | None = None,
    ) -> None:
        """``database``: a ``postgresql://`` URL for the catalog (and the stores' indexes), else SQLite in
        the home; ``fsync``: how writes reach the disk (:class:`gitmem.durable.Durability`); ``master_key``:
        where encrypted stores' master key comes from (the home's ``master.key`` unless given);
        ``filters``: what every write is checked against (the secret detector unless given);
        ``search_budget``: the seconds one search may take in the database (then a 400);
        ``open_stores``: how many stores this process may hold open (else sized from its open-file
        limit, :mod:`gitmem.engine.open_stores`);
        ``signing_key``: where the key that signs every commit comes from (the home's ``signing.key``,
        made with the home, unless given). A bad or missing key fails here, before anything is written."""
        self.home = home
        self.clock = clock
        self.durability = Durability(fsync)
        self.search_budget = search_budget
        self.master_key = master_key or MasterKeySource()
        self.filters = filters or FilterChain()
        home.mkdir(parents=True, exist_ok=True)
        (home / "stores").mkdir(exist_ok=True)
        self.signer = HomeSigner(home, signing_key)
        self.catalog = Catalog.for_home(home, database or None, clock)
        self._stores = OpenStores(open_stores)
        self._keyring: KeyRing | None = None
        self._page_tokens: PageTokens | None = None
        self._services: dict[type, HomeTables] = {}
        self._services_lock = threading.Lock()
        self._listeners = ChangeListeners()

    @classmethod
    def open(
        cls,
        home: Path | str,
        *,
        database: str | None = None,
        fsync: FsyncMode = "always",
        master_key: MasterKeySource | None = None,
        filters: FilterChain | None = None,
        clock: Clock = system_clock,
        search_budget: float = SEARCH_BUDGET_SECONDS,
        open_stores: int | None = None,
        signing_key: SigningKeySource | None = None,
    ) -> Gitmem:
        """The home at ``home``, made if it does not exist (see :meth:`__init__` for the options)."""
        return cls(
            Path(home),
            database=database,
            fsync=fsync,
            master_key=master_key,
            filters=filters,
            clock=clock,
            search_budget=search_budget,
            open_stores=open_stores,
            signing_key=signing_key,
        )

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
        """Close the open stores (those in use as their users return them) and the database's
        connections (the pool, on PostgreSQL)."""
        self._stores.close_all()
        self.catalog.close()

    @property
    def keyring(self) -> KeyRing:
        """Data keys for encrypted stores, wrapped by the master key (made on first use only)."""
        if self._keyring is None:
            master = load_master_key(self.home, self.master_key)
            self._keyring = KeyRing(self.home / "keys.json", master, clock=self.clock)
        return self._keyring

    @property
    def page_tokens(self) -> PageTokens:
        """The codec of the catalog's listings (stores, workers, tasks, dreams)."""
        if self._page_tokens is None:
            self._page_tokens = tokens_for(self.home)  # kept: the module's table holds it weakly
        return self._page_tokens

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
        check_store_fields(name, description, metadata, filters=self.filters)
        self.catalog.workspace(workspace_id)
        store_id = ids.new_id(ids.STORE)
        try:  # a failure anywhere (a full disk) leaves no half-made folder behind
            repository.init_bare(self.repo_path(store_id), self.durability)
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
        check_store_fields(name, description, metadata, filters=self.filters)
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
        """The store's notes and versions: the process's open handle, shared by threads (each gets its
        own connection and repository from it), lent to the current lease scope and returned when it
        ends (:func:`gitmem.engine.open_stores.leases`; outside one, for the life of the process).
        ``info``: the store's catalog row as the caller has just read it for ``workspace_id`` (an
        access check), not read again."""
        if info is None or info.id != store_id or info.workspace_id != workspace_id:
            info = self.get_store(workspace_id, store_id)
        found = info

        def usable(store: MemoryStore) -> bool:
            # `gitmem encryption rotate` ran in another process: write with the new key.
            return store.path.exists() and not (found.encrypted and self._rotated_since(store))

        return self._stores.checkout(store_id, lambda: self._open_store(found), usable)

    def _open_store(self, info: StoreInfo) -> MemoryStore:
        store_id = info.id
        return MemoryStore(
            self.repo_path(store_id),
            store_id,
            policy=policy_for(info.kind, self.filters),
            codec=self.codec_for(info),
            clock=self.clock,
            write_guard=lambda: self._check_writable(store_id),
            on_commit=lambda s: self._listeners.notes_changed(s, info.workspace_id),
            on_redact=lambda s, v: self._listeners.version_redacted(s, info.workspace_id, v),
            on_conflict=lambda s, c: self._listeners.conflict_kept(s, info.workspace_id, c),
            database_url=self.index_database_url,
            durability=self.durability,
            search_budget=self.search_budget,
            signer=self.signer,
        )

    @staticmethod
    def leases() -> contextlib.AbstractContextManager[None]:
        """A lease scope: every store :meth:`store` lends inside is returned at its end (one a request,
        one a store a background loop visits; :func:`gitmem.engine.open_stores.leases`)."""
        return store_leases()

    def open_stores(self) -> OpenStoreStats:
        """The stores this process holds open, their evictions and its descriptor headroom."""
        return self._stores.stats()

    @property
    def open_store_cache(self) -> OpenStores:
        """The cache itself (the server's maintenance sweeps it; tests evict from it)."""
        return self._stores

    def opened_before(self, store_id: str) -> bool:
        """Whether a thread of this process has opened the store: opening it again then only reads
        (a first open may make the index's tables, and wait for another writer to do so)."""
        return self._stores.opened_before(store_id)

    def listen(self, listener: ChangeListener) -> None:
        """Tell ``listener`` of every change that lands in a store of this home (the webhooks' outbox,
        attached where a program opens the home). A listener attached twice is told once."""
        self._listeners.add(listener)

    def tell_notes_changed(self, store: MemoryStore, workspace_id: str) -> None:
        """Tell the listeners of a change that landed by other means than the store's writes (a push)."""
        self._listeners.notes_changed(store, workspace_id)

    def _rotated_since(self, store: MemoryStore) -> bool:
        return getattr(store.codec, "key_id", None) != self.keyring.current(store.id).key_id

    def _check_writable(self, store_id: str) -> None:
        info = self.catalog.cache.get("store", store_id, lambda: self.catalog.store(store_id))
        if info.archived_at is not None:
            raise ArchivedStore(
                f"memory store {store_id} is archived; its notes can be read and deleted, not created or changed"
            )

    def _forget(self, store_id: str) -> None:
        self._stores.forget(store_id)

    def all_stores(self) -> list[StoreInfo]:
        from gitmem.engine.catalog.catalog import store_info

        return [store_info(r) for r in self.catalog.db.execute("SELECT * FROM stores ORDER BY created_at")]
