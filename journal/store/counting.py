"""A store wrapper that counts the reads made through it, so a command can state its
cost in requests (``journal stats``). Every call goes to the wrapped store unchanged;
writes and deletes pass through uncounted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import BinaryIO

from .base import Store

__all__ = ["CountingStore"]


class CountingStore(Store):
    """Delegates to ``inner`` and counts its reads: ``lists`` (listings, with sizes or
    not: one each, however many pages a cloud listing takes), ``heads``, ``gets`` by the
    key's first component (``manifests``, ``packs``, ``config``, ...) and ``bytes_read``.
    A read that fails still counts: the request was made."""

    def __init__(self, inner: Store):
        self.inner = inner
        self.location = inner.location
        self.read_ahead = inner.read_ahead
        self.lists = 0
        self.heads = 0
        self.gets: Counter[str] = Counter()
        self.bytes_read = 0

    def put_if_absent(self, key: str, data: bytes | BinaryIO) -> None:
        self.inner.put_if_absent(key, data)

    def put_file_if_absent(self, key: str, path: str) -> None:
        self.inner.put_file_if_absent(key, path)

    def put_first_absent(self, keys: Iterable[str], data: bytes) -> str | None:
        return self.inner.put_first_absent(keys, data)

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

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def delete_many(self, keys: Sequence[str], guard: Callable[[str], bool] | None = None) -> list[str]:
        return self.inner.delete_many(keys, guard)

    def is_empty(self) -> bool:
        self.lists += 1
        return self.inner.is_empty()

    def check_creatable(self, dry_run: bool = False) -> None:
        self.inner.check_creatable(dry_run)

    def local_file(self, key: str) -> str | None:
        return self.inner.local_file(key)

    def missing_parent(self) -> str | None:
        return self.inner.missing_parent()

    def sweep_temp(self) -> None:
        self.inner.sweep_temp()

    def close(self) -> None:
        self.inner.close()
