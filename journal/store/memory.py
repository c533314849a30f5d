"""The in-memory backend: a dict behind a lock, for tests (the CLI refuses ``memory://``).

It keeps the same contract as every other backend (``tests/store_contract.py``).
Nothing survives the process.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import BinaryIO

from ..atomic import COPY_CHUNK
from ..errors import KeyExists, ObjectNotFound
from .base import Store, check_key

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """A thread-safe, dict-backed store.

    ``puts`` and ``put_bytes`` count successful puts and their payload bytes.
    """

    def __init__(self) -> None:
        self.location = "memory://"
        self.puts = 0
        self.put_bytes = 0
        self._objects: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put_if_absent(self, key: str, data: bytes | BinaryIO) -> None:
        """Publish ``data`` under ``key``; ``KeyExists`` if present (the old bytes are kept).

        A stream is read to EOF in ``COPY_CHUNK`` pieces before the key is claimed, so
        the object appears whole or not at all.
        """
        check_key(key)
        payload = bytes(data) if isinstance(data, (bytes, bytearray, memoryview)) else _read_all(data)
        with self._lock:
            if key in self._objects:
                raise KeyExists(key)
            self._objects[key] = payload
            self.puts += 1
            self.put_bytes += len(payload)

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` of the object; ``ObjectNotFound`` if missing; past-end truncates."""
        check_key(key)
        if start < 0 or (end is not None and end < 0):
            raise ValueError(f"invalid byte range: [{start}, {end})")
        with self._lock:
            payload = self._objects.get(key)
        if payload is None:
            raise ObjectNotFound(key)
        return payload[start:end]

    def head(self, key: str) -> int | None:
        """The object's size, or ``None`` when the key is missing."""
        check_key(key)
        with self._lock:
            payload = self._objects.get(key)
        return None if payload is None else len(payload)

    def list(self, prefix: str = "") -> Iterator[str]:
        """Yield keys starting with ``prefix`` in ascending byte order (a snapshot taken now)."""
        with self._lock:
            keys = sorted(k for k in self._objects if k.startswith(prefix))
        return iter(keys)

    def list_sizes(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """``(key, size)`` for the keys ``list(prefix)`` yields (a snapshot taken now)."""
        with self._lock:
            found = sorted((k, len(v)) for k, v in self._objects.items() if k.startswith(prefix))
        return iter(found)

    def delete(self, key: str) -> None:
        """Remove ``key``; deleting a missing key does nothing."""
        check_key(key)
        with self._lock:
            self._objects.pop(key, None)


def _read_all(stream: BinaryIO) -> bytes:
    """Read ``stream`` to EOF in bounded pieces."""
    pieces = []
    while piece := stream.read(COPY_CHUNK):
        pieces.append(piece)
    return b"".join(pieces)
