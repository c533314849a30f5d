"""A map bounded by weight, the least recently used value dropped first: what a mount
keeps in memory (file bytes by blob id, index pages, manifests, directory listings)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable


def _one(_value: object) -> int:
    return 1


class Lru:
    """Values by key whose weights (``weigh(value)``, 1 each by default) add up to at
    most ``limit``: a new value drops the least recently used ones until they fit, and
    is itself not kept when it alone weighs more. ``get`` and ``[]=`` are what ``View``
    uses of a dict; both are safe from several threads."""

    def __init__(self, limit: int, weigh: Callable[[object], int] = _one):
        self.limit = limit
        self.weight = 0
        self._weigh = weigh
        self._items: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, default=None):
        """The value kept for ``key`` (now the most recently used), else ``default``."""
        with self._lock:
            got = self._items.get(key)
            if got is None:
                return default
            self._items.move_to_end(key)
            return got[0]

    def __setitem__(self, key: Hashable, value: object) -> None:
        weight = self._weigh(value)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.weight -= old[1]
            self._items[key] = (value, weight)
            self.weight += weight
            while self.weight > self.limit and self._items:
                _, (_, dropped) = self._items.popitem(last=False)
                self.weight -= dropped

    def __len__(self) -> int:
        return len(self._items)
