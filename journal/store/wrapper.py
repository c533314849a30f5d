"""A store that hands every call to another: the base of wrappers that add behaviour
and keep the interface (``counting.py`` counts reads, ``whole.py`` reads small
objects whole)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import BinaryIO

from .base import Staged, Store


class StoreWrapper(Store):
    """Every method is ``inner``'s, unchanged; a subclass overrides what it adds to."""

    def __init__(self, inner: Store):
        self.inner = inner
        self.location = inner.location
        self.read_ahead = inner.read_ahead

    def put_if_absent(self, key: str, data: bytes | BinaryIO) -> None:
        self.inner.put_if_absent(key, data)

    def put_file_if_absent(self, key: str, path: str) -> None:
        self.inner.put_file_if_absent(key, path)

    def put_first_absent(self, keys: Iterable[str], data: bytes) -> str | None:
        return self.inner.put_first_absent(keys, data)

    def stage(self, key: str, data: bytes) -> Staged:
        return self.inner.stage(key, data)

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        return self.inner.get(key, start, end)

    def head(self, key: str) -> int | None:
        return self.inner.head(key)

    def list(self, prefix: str = "") -> Iterator[str]:
        return self.inner.list(prefix)

    def list_sizes(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        return self.inner.list_sizes(prefix)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def delete_many(self, keys: Sequence[str], guard: Callable[[str], bool] | None = None) -> list[str]:
        return self.inner.delete_many(keys, guard)

    def is_empty(self) -> bool:
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
