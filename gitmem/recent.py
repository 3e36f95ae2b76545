"""A map that keeps only its most recently used entries, safe across threads.

What a process remembers of each store it has touched (a packing policy, an index file checked sound,
an index schema seen current, a store's approved view) must not grow with the stores touched: a node
touches thousands. Each such memory is a :class:`Recent` of a fixed size; an entry it forgets costs
only the work of finding it again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Recent(Generic[K, V]):
    """At most ``size`` entries; a read or a write makes an entry the most recent, and past ``size`` the
    least recent is dropped."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._keep(key)

    def get_or_put(self, key: K, make: Callable[[], V]) -> V:
        """The entry of ``key``, made by ``make()`` (under the lock: keep it cheap) if there is none."""
        with self._lock:
            value = self._items.get(key)
            if value is None:
                value = self._items[key] = make()
            self._keep(key)
            return value

    def forget(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)

    def drop(self, where: Callable[[K], bool]) -> None:
        """Forget every entry whose key ``where`` says."""
        with self._lock:
            for key in [k for k in self._items if where(k)]:
                del self._items[key]

    def _keep(self, key: K) -> None:
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)
