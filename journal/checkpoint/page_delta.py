"""Index pages written as deltas against the page they replace.

A checkpoint that changes one file rewrites the index page holding its entry, and
that page differs from the one it replaces by a few bytes. Such a page is stored
compressed against a *base*: the whole (non-delta) page that the replaced page was,
or was itself a delta of. The record carries the base's reference (``format/objects.py``),
so every reader finds it without other metadata, and gc's reachability walk, which
reads every page anyway, keeps the base's pack.

* Which page a new page replaces: the old page with the same ``(level, first path)``
  (content-defined boundaries keep a page's first path while the boundary before it
  stands). No such page: the new page is stored whole.
* Chains stay one deep: a base is always a whole page, because the base of a new page
  is the old page's own base when the old page is a delta.
* A delta is kept only when it is smaller than the whole page and its zstd frame is
  at most half the whole page's; otherwise the page is stored whole and becomes the
  base of later deltas (a keyframe), so deltas stop growing as a page drifts from its
  base.
* The base is named by position (``FLAG_BASE_AT``: pack, offset, length; 44 bytes): its
  id and size are in its own header, so small pages (inner pages, short leaves) pay
  too. A base with no committed pack name to be named by makes the new page whole.
* A base whose bytes cannot be read (missing, corrupt) makes the new page whole.

Every page of the current indexes, and the base of each stored as a delta, is
remembered locally (``<state_dir>/pages``, checked against its id on every read), so a
checkpoint reads no page from the store in the normal case: neither a base nor a leaf
of the last index it updates (``format/index.update_index``).
"""

from __future__ import annotations

from ..errors import CorruptObject, ObjectNotFound
from ..local.state import TreeCache
from ..format.model import BlobRef, Page, decode
from ..format.objects import FLAG_ENTRY_BASES, KIND_PAGE, BaseAt, delta_pays, encode_record, is_id
from ..repository.pack import PackWriter
from ..repository.blob_cache import BlobCache



class IndexWriter:
    """Adds one checkpoint's new index pages, as deltas where that pays."""

    def __init__(self, pack: PackWriter, pages: BlobCache):
        self.pack = pack
        self.pages = pages
        # (placeholder pack, offset) of each new delta record -> its base. By record,
        # not by page id: two trees may build byte-identical pages, one a delta and one
        # whole, and each tree's cache must name the base of its own record only.
        self.bases: dict[tuple[str, int], BlobRef] = {}

    def adder(self, cache: TreeCache):
        """The ``add_page`` callback of ``build_index`` for one tree's previous cache."""
        replaced = {key: pid for pid, key in cache.page_keys.items()}

        def add_page(payload: bytes, key: tuple[int, str]) -> BlobRef:
            old = replaced.get(tuple(key))
            base_ref = None if old is None else cache.bases.get(old) or cache.pages.get(old)
            return self._add(payload, base_ref)
        return add_page

    def _add(self, payload: bytes, base_ref: BlobRef | None) -> BlobRef:
        marks = _marks(payload)
        pid, whole = encode_record(KIND_PAGE, payload, marks=marks, codec=self.pack.codec)
        if base_ref is not None and is_id(base_ref.pack):  # a committed pack: it can be named by position
            try:
                base = self.pages.read(base_ref)
            except (CorruptObject, ObjectNotFound):
                base = None
            if base is not None:
                _, delta = encode_record(KIND_PAGE, payload, base=base, marks=marks, codec=self.pack.codec,
                                         names=BaseAt(base_ref.pack, base_ref.offset, base_ref.length))
                if delta_pays(delta, whole):
                    ref = self.pack.add_record(pid, delta, len(payload))
                    self.bases[(ref.pack, ref.offset)] = base_ref
                    self.pages.remember(pid, payload)   # the next checkpoint's update reads it (not as a base)
                    return ref
        self.pages.remember(pid, payload)
        return self.pack.add_record(pid, whole, len(payload))

    def settle(self, cache: TreeCache, used: dict[str, BlobRef], keys: dict[str, tuple[int, str]]) -> None:
        """Record in the tree's cache each used page's key and, for a delta, its base."""
        cache.bases = {pid: base for pid, ref in used.items()
                       if (base := self.bases.get((ref.pack, ref.offset)) or cache.bases.get(pid)) is not None}
        cache.page_keys = {pid: keys[pid] for pid in used}


def _marks(payload: bytes) -> int:
    """``FLAG_ENTRY_BASES`` for a leaf page one of whose entries names chunk bases."""
    page = decode(payload, Page)
    return FLAG_ENTRY_BASES if any(e.bases for e in page.entries) else 0


def keep_pages(trees: dict[str, TreeCache]) -> set[str]:
    """The pages later checkpoints read: every current page (the next index is updated
    from them, ``format/index.update_index``) and, for one stored as a delta, its base
    (later deltas are made against whole pages only)."""
    return {pid for c in trees.values() for pid in c.pages} | {base.id for c in trees.values()
                                                               for base in c.bases.values()}
