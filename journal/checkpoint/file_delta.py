"""Rewritten files stored as deltas of their previous version.

Agents rewrite small JSON files whole on every turn: Claude Code's ``.claude.json``,
Gemini's ``logs.json``, OpenClaw's ``sessions.json``. A few numbers change, yet the
whole file is new bytes. A changed chunk of such a file is stored as a delta
(``FLAG_DELTA`` on a chunk record) compressed against the chunk at the same index of
the file's previous version, as a zstd raw-content dictionary.

* The entry names each delta chunk's base (``Entry.bases``, aligned with ``refs``;
  None for a whole chunk), so gc, verify and restore find it in the index like any
  other blob, without reading data records.
* Chains stay one deep: a base is always a whole chunk (the previous chunk's own base
  when the previous chunk is a delta).
* A delta is kept only when it pays (``objects.delta_pays``): otherwise the chunk is
  stored whole and becomes the base of later rewrites (a keyframe).
* A base's bytes come from a local copy (``<state_dir>/chunks/<id>``, checked against
  its id on every read), kept for each whole chunk stored for a rewritten file of at
  most ``MAX_FILE`` bytes. No copy (the first rewrite, a fresh machine): the chunk is
  stored whole, and becomes the base. A checkpoint never reads a base from the store.
  The copies are pruned and bounded as ``checkpoint/chunk_copies.py`` says.
"""

from __future__ import annotations

from ..format.model import BlobRef
from ..format.objects import KIND_CHUNK, delta_pays, encode_record
from ..repository.pack import PackWriter
from ..repository.blob_cache import BlobCache

#: Files up to this size keep local copies of their whole chunks once rewritten.
MAX_FILE = 4 << 20


class FileDeltas:
    """Stores the changed chunks of rewritten files, as deltas where that pays."""

    def __init__(self, writer: PackWriter, cache: BlobCache):
        self.writer = writer
        self.cache = cache
        self.remembered: list[str] = []   # whole chunks kept as future bases this checkpoint

    def chunk(self, data: bytes, base: BlobRef | None) -> tuple[BlobRef, BlobRef | None]:
        """Store one changed chunk of a rewritten file; ``base`` is the whole chunk at
        the same index of its previous version (None: there is none). Returns the new
        ref and its base (None when stored whole)."""
        codec = self.writer.codec
        rid, whole = encode_record(KIND_CHUNK, data, codec=codec)
        base_payload = None if base is None else self.cache.cached(base.id)
        if base_payload is not None:
            self.cache.touch(base.id)  # in use: the last copy the size bound drops
            _, delta = encode_record(KIND_CHUNK, data, base=base_payload, codec=codec)
            if delta_pays(delta, whole, named=0):
                return self.writer.add_record(rid, delta, len(data)), base
        self.cache.remember(rid, data)
        self.remembered.append(rid)
        return self.writer.add_record(rid, whole, len(data)), None
