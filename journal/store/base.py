"""The store: named, immutable bytes. It knows nothing about packs or manifests.

Keys are ``/``-separated relative names made of ``[A-Za-z0-9._-]`` components; no
component is empty, ``.`` or ``..``, and no component starts with ``.`` (names that
start with ``.`` are reserved for a backend's own bookkeeping, such as the local
backend's temp directory).
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import BinaryIO

from ..errors import KeyExists

_KEY = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$")


def check_key(key: str) -> str:
    """Return ``key`` if it is a valid store key, else raise ``ValueError``."""
    if not _KEY.match(key) or len(key) > 512:
        raise ValueError(f"invalid store key: {key!r}")
    return key


class Staged:
    """An object ``Store.stage`` made ready: ``publish`` puts it (at most once);
    ``discard`` drops what a publish did not take (after a publish: nothing)."""

    def __init__(self, publish: Callable[[], None], discard: Callable[[], None] | None = None):
        self._publish, self._discard = publish, discard
        self.published = False

    def publish(self) -> None:
        """Put-if-absent under the staged key: ``KeyExists`` when taken (the staged
        object is kept: it may be discarded, never published elsewhere)."""
        self._publish()
        self.published = True

    def discard(self) -> None:
        if not self.published and self._discard is not None:
            self._discard()
        self._discard = None


class Store(abc.ABC):
    """An object store: put-if-absent of closed objects, get, head, list (with or
    without sizes), delete (one key, or many at once).

    There is no append, no in-place update and no visible rename. Every backend
    passes ``tests/store_contract.py``.
    """

    #: A human-readable location (path or URL), used in messages.
    location: str = ""
    #: Whether a reader gains from fetching ahead in other threads (``repository/fetch.py``): a
    #: round trip to serve (a cloud store, a FUSE or network mount). A directory on a
    #: local disk answers from the page cache, where the thread handoffs cost more.
    read_ahead: bool = True

    @abc.abstractmethod
    def put_if_absent(self, key: str, data: bytes | BinaryIO) -> None:
        """Publish ``data`` (bytes, or a binary stream read to EOF) under ``key``.

        The object becomes visible whole or not at all. Raises ``KeyExists`` if the
        key is already present; the existing object is left untouched. A stream is
        read sequentially in bounded pieces.
        """

    def put_file_if_absent(self, key: str, path: str) -> None:
        """Publish the closed local file ``path`` under ``key``, as ``put_if_absent`` of
        its bytes (``KeyExists`` when present). The caller never writes ``path`` again and
        removes it afterwards. This default reads the file; the local backend links it
        into the store instead of copying it when it can (``LocalStore.put_file_if_absent``)."""
        with open(path, "rb") as src:
            self.put_if_absent(key, src)

    def put_first_absent(self, keys: Iterable[str], data: bytes) -> str | None:
        """Publish ``data`` under the first key of ``keys`` that is absent, trying them in
        turn, and return it; None when every key was taken. ``keys`` may be a generator
        that decides the next key from the misses so far. This default makes one
        ``put_if_absent`` per key; the local backend writes and fsyncs the bytes once and
        only renames them again per key (a key taken costs a rename, not a write).
        """
        for key in keys:
            try:
                self.put_if_absent(key, data)
            except KeyExists:
                continue
            return key
        return None

    def stage(self, key: str, data: bytes) -> Staged:
        """Make ``data`` ready to publish under ``key``, publishing nothing yet: no key
        shows it until ``Staged.publish``, which is ``put_if_absent(key, data)``
        (``KeyExists`` when taken). Where a put takes two steps (the local backend: a
        temp file written and fsynced, on hf-mount uploaded when it closes; then a
        rename), the first is taken here, so a caller can overlap it with other uploads
        and keep only the rename for its commit point. This default keeps the bytes and
        does the whole put in ``publish``. The caller calls ``discard`` when done, in
        every case."""
        return Staged(lambda: self.put_if_absent(key, data))

    @abc.abstractmethod
    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Return bytes ``[start, end)`` of the object (``end=None``: to the end).

        Raises ``ObjectNotFound`` for a missing key. A range past the end is
        truncated to the object's size, as a slice would be.
        """

    @abc.abstractmethod
    def head(self, key: str) -> int | None:
        """Return the object's size in bytes, or ``None`` if the key is missing."""

    @abc.abstractmethod
    def list(self, prefix: str = "") -> Iterator[str]:
        """Yield every key that starts with ``prefix``, in ascending byte order.

        ``prefix`` is a plain string prefix (``"packs/"`` or ``"manifests/00"``).
        Keys published while the iterator runs may or may not appear.
        """

    def list_sizes(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """Yield ``(key, size in bytes)`` for every key ``list(prefix)`` yields, in the same order.

        The sizes come with the listing (a directory entry, a listing page), not one
        request per key: every backend here overrides this. This fallback, for a store
        that does not, HEADs each key and skips one deleted since it was listed.
        """
        for key in self.list(prefix):
            size = self.head(key)
            if size is not None:
                yield key, size

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``. Deleting a missing key is not an error (idempotent)."""

    def delete_many(self, keys: Sequence[str], guard: Callable[[str], bool] | None = None) -> list[str]:
        """Remove every key of ``keys``; missing keys are not an error (idempotent).
        Returns the keys ``guard`` kept (see below); normally none.

        Every key is checked before anything is deleted (``ValueError``). The keys are
        deleted in no particular order, and when this raises any of them may be gone:
        a caller that needs an order (references before objects) makes one call per
        step. This default deletes one key at a time, as one step; a backend with a
        bulk request (the cloud backend: up to 1,000 keys per request) overrides it.
        When a bulk request fails, the backend redoes it key by key, one request each:
        ``guard(key)`` is called before each of those, may raise to stop, and returns
        False to keep that key (gc checks its lease and the manifests there).
        """
        for key in [check_key(key) for key in keys]:
            self.delete(key)
        return []

    def exists(self, key: str) -> bool:
        """True when ``key`` is present."""
        return self.head(key) is not None

    def is_empty(self) -> bool:
        """True when the store holds no keys (and, for the local backend, no foreign files)."""
        return next(iter(self.list("")), None) is None

    def check_creatable(self, dry_run: bool = False) -> None:
        """Raise ``StoreError`` when a new store must not be created here (the default: it
        may); with ``dry_run``, only say so, creating nothing on the way."""

    def local_file(self, key: str) -> str | None:
        """The file that holds ``key`` when the store is a directory on this machine (a
        path to stat); None for a store without one."""
        return None

    def missing_parent(self) -> str | None:
        """The directory a store here would be created in, when it does not exist (a
        volume that is not mounted); None when it does, or for a store without one."""
        return None

    def sweep_temp(self) -> None:
        """Remove temp files a crashed writer left behind (backends without any: nothing)."""

    def close(self) -> None:
        """Release resources. The default does nothing."""
