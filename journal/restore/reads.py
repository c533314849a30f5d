"""What restore reads from the store, named as narrow protocols.

A function that takes a ``BlobReads`` or a ``StagingReads`` says which reads it
makes; a ``Repository`` is both (``tests/test_restore.py`` checks it). The model is
restic's ``LoaderUnpacked``: the restorer asks for what it loads, not for the whole
repository.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..format.codec import Codec
from ..format.model import BlobRef


@runtime_checkable
class BlobReads(Protocol):
    """Verified blobs and the codec that names them: what deciding one entry reads
    (``entry.decide``: a transcript's last segment, a database's page maps)."""

    @property
    def codec(self) -> Codec: ...

    def read_blob(self, ref: BlobRef, kind: int | None = None) -> bytes:
        """The blob ``ref`` names, verified; ``kind`` is the record kind it must be."""

    def read_record(self, ref: BlobRef) -> bytes | memoryview:
        """The record ``ref`` names, as stored (its reader verifies it)."""


@runtime_checkable
class StagingReads(BlobReads, Protocol):
    """What staging a file reads besides (``entry.stage_entry``): records in runs,
    whole chunks (a delta's base), and whether to fetch ahead in other threads."""

    @property
    def read_ahead(self) -> bool: ...

    def read_records(self, refs: list[BlobRef]) -> list[bytes | memoryview]:
        """The records ``refs`` name (back to back in one pack), as stored, in order."""

    def read_whole(self, ref: BlobRef, kind: int | None = None) -> bytes:
        """A blob stored whole (never a delta), verified."""
