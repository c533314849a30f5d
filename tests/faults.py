"""A fault-injecting store: delegates to an inner ``Store`` and fails chosen calls.

``FaultyStore(inner, fail_at=N)`` raises ``StoreError`` instead of making the N-th call
(1-based, counted over every store call: ``put_if_absent``, ``get``, ``head``, ``list``,
``delete``, ``sweep_temp``; ``exists`` and ``is_empty`` count as the ``head``/``list``
they make). ``FaultyStore(inner, fail_when=pred)`` fails every call for which
``pred(method, key)`` is true. ``after=callback`` is called with ``(method, key)``
after each call that went through, so a test can act at a precise moment (stop a
server once a pack is published). ``calls`` records every ``(method, key)`` tried and
``failed`` those that were refused. A refused call never reaches the inner store.
``error=make`` raises ``make(method, key)`` instead of the ``StoreError`` (a raw
``OSError``, say, as opening a spool file can raise).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import BinaryIO

from journal.errors import StoreError
from journal.store.base import Store

Predicate = Callable[[str, str], bool]


class FaultyStore(Store):
    """``inner`` with injected ``StoreError`` faults; see the module docstring."""

    def __init__(self, inner: Store, *, fail_at: int | None = None, fail_when: Predicate | None = None,
                 after: Callable[[str, str], None] | None = None,
                 error: Callable[[str, str], BaseException] | None = None):
        self.inner = inner
        self.error = error
        self.location = inner.location
        self.fail_at = fail_at
        self.fail_when = fail_when
        self.after = after
        self.calls: list[tuple[str, str]] = []
        self.failed: list[tuple[str, str]] = []
        self._lock = threading.Lock()   # pack uploads run on worker threads

    @property
    def puts(self) -> int:
        return self.inner.puts

    @property
    def put_bytes(self) -> int:
        return self.inner.put_bytes

    def _enter(self, method: str, key: str) -> None:
        with self._lock:
            self.calls.append((method, key))
            n = len(self.calls)
            fail = n == self.fail_at or (self.fail_when is not None and self.fail_when(method, key))
            if fail:
                self.failed.append((method, key))
        if fail:
            if self.error is not None:
                raise self.error(method, key)
            raise StoreError(f"{method} {key}: injected fault (store call {n})")

    def _done(self, method: str, key: str) -> None:
        if self.after is not None:
            self.after(method, key)

    def put_if_absent(self, key: str, data: bytes | BinaryIO) -> None:
        self._enter("put_if_absent", key)
        self.inner.put_if_absent(key, data)
        self._done("put_if_absent", key)

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        self._enter("get", key)
        data = self.inner.get(key, start, end)
        self._done("get", key)
        return data

    def head(self, key: str) -> int | None:
        self._enter("head", key)
        size = self.inner.head(key)
        self._done("head", key)
        return size

    def list(self, prefix: str = "") -> Iterator[str]:
        self._enter("list", prefix)
        keys = list(self.inner.list(prefix))
        self._done("list", prefix)
        return iter(keys)

    def delete(self, key: str) -> None:
        self._enter("delete", key)
        self.inner.delete(key)
        self._done("delete", key)

    def sweep_temp(self) -> None:
        self._enter("sweep_temp", "")
        self.inner.sweep_temp()
        self._done("sweep_temp", "")

    def close(self) -> None:
        self.inner.close()
