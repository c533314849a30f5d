"""A store wrapper that reads small objects whole (``WholeReads``).

A ranged get of an object its caller says is small reads all of it, once; later ranges
of it are answered from memory, the least recently read objects dropped past ``kept``
bytes. ``journal verify`` reads each index page a checkpoint added, a few records of
one small pack, by a ranged get of its own: on a local disk an open, a stat, a read
and a close each (a fifth of its time), over a link a round trip each.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from .base import Store
from .wrapper import StoreWrapper

#: Objects up to this size are read whole.
SMALL = 256 << 10
#: Bytes of whole objects kept.
KEPT = 8 << 20


class WholeReads(StoreWrapper):
    """``inner``, with each object ``size_of(key)`` says is at most ``small`` bytes read
    whole at its first ranged get (None: not known, read as asked). For one reader at a
    time: the objects it keeps are not shared between threads."""

    def __init__(self, inner: Store, size_of: Callable[[str], int | None], small: int = SMALL, kept: int = KEPT):
        super().__init__(inner)
        self.size_of, self.small, self.kept = size_of, small, kept
        self._whole: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """As ``Store.get``; a small object's ranges come from its one whole read."""
        data = self._whole.get(key)
        if data is not None:
            self._whole.move_to_end(key)
        else:
            size = self.size_of(key)
            if size is None or size > self.small or start < 0 or (end is not None and end < 0):
                return self.inner.get(key, start, end)
            data = self._keep(key, self.inner.get(key, 0, size))
        stop = len(data) if end is None else min(end, len(data))
        return data[start:stop] if start < stop else b""

    def _keep(self, key: str, data: bytes) -> bytes:
        self._whole[key] = data
        self._bytes += len(data)
        while self._bytes > self.kept and len(self._whole) > 1:
            self._bytes -= len(self._whole.popitem(last=False)[1])
        return data
