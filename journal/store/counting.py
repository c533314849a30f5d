"""A store wrapper that counts the reads made through it, so a command can state its
cost in requests (``journal stats``). Every call goes to the wrapped store unchanged;
writes and deletes pass through uncounted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from .base import Store
from .wrapper import StoreWrapper

__all__ = ["CountingStore"]


class CountingStore(StoreWrapper):
    """Delegates to ``inner`` and counts its reads: ``lists`` (listings, with sizes or
    not: one each, however many pages a cloud listing takes), ``heads``, ``gets`` by the
    key's first component (``manifests``, ``packs``, ``config``, ...) and ``bytes_read``.
    A read that fails still counts: the request was made."""

    def __init__(self, inner: Store):
        super().__init__(inner)
        self.lists = 0
        self.heads = 0
        self.gets: Counter[str] = Counter()
        self.bytes_read = 0

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        self.gets[key.partition("/")[0]] += 1
        data = self.inner.get(key, start, end)
        self.bytes_read += len(data)
        return data

    def head(self, key: str) -> int | None:
        self.heads += 1
        return self.inner.head(key)

    def list(self, prefix: str = "") -> Iterator[str]:
        self.lists += 1
        return self.inner.list(prefix)

    def list_sizes(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        self.lists += 1
        return self.inner.list_sizes(prefix)

    def is_empty(self) -> bool:
        self.lists += 1
        return self.inner.is_empty()
