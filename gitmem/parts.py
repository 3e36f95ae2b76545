"""A home's parts, bound once: :class:`Parts` is one object for a data home with a typed property for each
part that keeps its own tables in the catalog (reviews, tasks, dreams, profiles, webhooks, web sessions),
and :meth:`Parts.open_store`, the store as a caller may read it.

The programs at the edge (the app, and through it REST, MCP, Git over HTTP and the web view) make one
``Parts(gm)`` where they open the home and hand it down, rather than looking each part up by class
(``Reviews.of(gm)``) wherever they need it. It lives above the agents, the webhooks and the banks because
it must see them all, as :mod:`gitmem.access` and :mod:`gitmem.home_tables` do; the engine knows nothing
of it.

Each property is the part's one instance for the home (``HomeTables.of``): the CLI and the agents, which
reach a part that way, share it, and its tables are made on first use.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitmem.access import require_store
from gitmem.agents.dreams.dreams import Dreams
from gitmem.agents.review.review import Reviews
from gitmem.agents.tasks.tasks import Tasks
from gitmem.agents.tasks.values import Access
from gitmem.banks.profiles import Profiles
from gitmem.engine.catalog.catalog import Principal
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.engine.web_sessions import WebSessions
from gitmem.model import StoreInfo
from gitmem.webhooks.outbox import Webhooks


class Parts:
    """The parts of one data home (``gm``), and the store as a caller may read it."""

    def __init__(self, gm: Gitmem) -> None:
        self.gm = gm

    @property
    def reviews(self) -> Reviews:
        return Reviews.of(self.gm)

    @property
    def tasks(self) -> Tasks:
        return Tasks.of(self.gm)

    @property
    def dreams(self) -> Dreams:
        return Dreams.of(self.gm)

    @property
    def profiles(self) -> Profiles:
        return Profiles.of(self.gm)

    @property
    def webhooks(self) -> Webhooks:
        return Webhooks.of(self.gm)

    @property
    def web_sessions(self) -> WebSessions:
        return WebSessions.of(self.gm)

    def grant(self, principal: Principal, store_id: str, *, write: bool) -> StoreGrant:
        """The caller's access to the store, checked: ``NotFound`` if they may not see it (another
        workspace's, another user's bank, outside a task's list), ``PermissionDenied`` for a write without
        write access. Only catalog reads: an event loop may ask it under ``catalog.without_waiting()``."""
        info, access = require_store(self.gm, principal, store_id, write=write)
        return StoreGrant(self, principal, store_id, info, access)

    def open_store(self, principal: Principal, store_id: str, *, write: bool) -> MemoryStore:
        """The store as this caller may read it (:meth:`grant`, then :meth:`StoreGrant.open`): REST, MCP,
        Git over HTTP and the web view all ask this."""
        return self.grant(principal, store_id, write=write).open()


@dataclass(frozen=True)
class StoreGrant:
    """A caller's checked access to one store (:meth:`Parts.grant`), opened by :meth:`open` in the thread
    that uses it: the engine's store objects belong to one thread each."""

    parts: Parts
    principal: Principal
    store_id: str
    info: StoreInfo  # the store's catalog row as the check read it
    access: Access

    @property
    def reads_approved_only(self) -> bool:
        """Whether the caller reads only the store's approved state (a task, on a store under review that
        is set to ``read_approved_only``): then the history itself is not theirs to read."""
        return self.parts.reviews.reads_approved_only(self.principal, self.store_id)

    def open(self) -> MemoryStore:
        """The store, or for a task reading only approved state, its approved view at the review mark."""
        gm = self.parts.gm
        store = gm.store(self.principal.workspace_id, self.store_id, info=self.info)
        return self.parts.reviews.reader(store, self.principal)
