"""The target's writes, counted: what a copy put and what it found already there.

Every object is put only if absent. A pack is HEADed first, so a pack that a killed
copy uploaded before (the same bytes under the same name) is not sent again; a
manifest or an input record goes straight to ``put_if_absent``, whose ``KeyExists``
the caller judges (the same object, or another one: a target that moved on).
"""

from __future__ import annotations

import os
import msgspec

from ..errors import KeyExists
from ..store.base import Store


class Tally(msgspec.Struct, kw_only=True):
    """Objects and bytes put, and found already in the target."""

    objects: int = 0
    bytes: int = 0
    skipped_objects: int = 0
    skipped_bytes: int = 0

    def put(self, size: int) -> None:
        self.objects += 1
        self.bytes += size

    def skipped(self, size: int) -> None:
        self.skipped_objects += 1
        self.skipped_bytes += size


class Sink:
    """Writes to the target store ``store``, counted in ``tally``. It has the two put
    methods a ``PackWriter`` and the copy call, and no others."""

    def __init__(self, store: Store):
        self.store = store
        self.tally = Tally()

    def put_file_if_absent(self, key: str, path: str) -> None:
        """Publish the closed file ``path`` under ``key`` unless the target holds ``key``
        already (then it counts as skipped: objects are named by their content, so the
        object there is these bytes). Never raises ``KeyExists``."""
        size = os.path.getsize(path)
        if self.store.head(key) is not None:
            self.tally.skipped(size)
            return
        try:
            self.store.put_file_if_absent(key, path)
        except KeyExists:  # another copy put it since the HEAD
            self.tally.skipped(size)
            return
        self.tally.put(size)

    def put_if_absent(self, key: str, data: bytes) -> None:
        """``Store.put_if_absent`` of ``data``, counted when it is put;
        ``KeyExists`` when the key is taken, for the caller to judge."""
        self.store.put_if_absent(key, data)
        self.tally.put(len(data))
