"""Reachability: every pack that a set of manifests needs, walking shared pages once.

A page id fixes its whole subtree, so a page already visited (in the same pack) is
not walked again: the cost grows with distinct pages, not with manifests.

A SQLite snapshot needs every page of its full map, not only the pages it ends up
with: a page its delta maps replace may be in the dictionary of a group delta (the
full map's pages of the group's members). Every map an entry names is walked whole,
so those bases stay reachable, and so does the base of a map stored as a delta.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ..errors import CorruptObject, ObjectNotFound
from .errors import GcBlocked
from ..format.index import decode_page
from ..format.model import KIND_SQLITE, BlobRef, Manifest, Page
from ..format.objects import KIND_PAGEMAP
from ..format.pagemap import PageLoc, PageMap, decode_map
from ..paths import shown
from ..repository.repository import RecordCache, Repository

SAMPLE = 10
#: Reads one page map: ``load_map(ref) -> (map, its pages, the base it is a delta of or None)``.
LoadMap = Callable[[BlobRef], tuple[PageMap, dict[int, PageLoc], BlobRef | None]]


class Reach:
    """Accumulates the packs reachable from the manifests walked so far."""

    def __init__(self, repo: Repository, kept: RecordCache | None = None):
        self.repo = repo
        self.kept = kept                  # whole records read: a delta's base is read once while kept
        self.load_map: LoadMap = self.read_map   # a caller that decodes the maps too may share them
        self.packs: set[str] = set()
        self.reasons: dict[str, str] = {}        # a sample: pack -> why it is needed
        self._pages: set[tuple[str, str]] = set()
        self._maps: set[tuple[str, str]] = set()

    def _need(self, pack: str, why) -> None:
        if pack not in self.packs:
            self.packs.add(pack)
            if len(self.reasons) < SAMPLE:
                self.reasons[pack] = why()

    def walk(self, manifest: Manifest) -> None:
        """Add every pack manifest ``manifest`` needs; ``GcBlocked`` when one of its index
        pages or page maps is missing or damaged."""
        for name, tree in sorted(manifest.trees.items()):
            try:
                self.walk_tree(manifest.seq, name, tree.root)
            except (CorruptObject, ObjectNotFound) as err:
                raise GcBlocked(manifest.seq, name, str(err)) from err

    def walk_tree(self, seq: int, tree: str, root: BlobRef | None) -> None:
        """Add every pack one tree of manifest ``seq`` needs; ``CorruptObject`` or
        ``ObjectNotFound`` when one of its index pages or page maps cannot be read."""
        stack = [root] if root is not None else []
        while stack:
            ref = stack.pop()
            if not self.enter_page(seq, tree, ref):
                continue
            payload, base = self.repo.read_page(ref, self.kept)
            self.note_base(seq, tree, base)
            page = decode_page(payload, f"page {ref.id[:12]}")
            for child in page.children:
                stack.append(child.ref if child.ref.pack else msgspec.structs.replace(child.ref, pack=ref.pack))
            self.note_entries(seq, tree, page)

    def enter_page(self, seq: int, tree: str, ref: BlobRef) -> bool:
        """Count index page ``ref`` and its pack as reached, before it is read; False when
        it was already (a walk reads each page once)."""
        if (ref.pack, ref.id) in self._pages:
            return False
        self._pages.add((ref.pack, ref.id))
        self._need(ref.pack, lambda: f"index page of tree {tree} in manifest {seq}")
        return True

    def note_base(self, seq: int, tree: str, base: BlobRef | None) -> None:
        """A page read as a delta needs its base page's pack too (``base``: None when whole)."""
        if base is not None:
            self._need(base.pack, lambda: f"base of an index page of tree {tree} in manifest {seq}")

    def note_entries(self, seq: int, tree: str, page: Page) -> None:
        """Add the packs the entries of a page read need: their records', their bases' and
        their page maps' (each map read once)."""
        for e in page.entries:
            for r in e.refs:
                self._need(r.pack, lambda: f"{tree}/{shown(e.path)} in manifest {seq}")
            for r in e.bases:  # a delta chunk's base
                if r is not None:
                    self._need(r.pack, lambda: f"base of a chunk of {tree}/{shown(e.path)} in manifest {seq}")
            if e.kind == KIND_SQLITE:
                self._walk_maps(seq, tree, e)

    def read_map(self, ref: BlobRef) -> tuple[PageMap, dict[int, PageLoc], BlobRef | None]:
        """One page map, read and decoded: ``(map, its pages, the base it is a delta of or None)``."""
        payload, base = self.repo.read_based(ref, KIND_PAGEMAP, self.kept)
        return (*decode_map(payload, ref.pack, f"pagemap {ref.id[:12]}"), base)

    def _walk_maps(self, seq: int, tree: str, entry) -> None:
        for ref in entry.refs:
            if (ref.pack, ref.id) in self._maps:
                continue
            self._maps.add((ref.pack, ref.id))
            pm, pages, base = self.load_map(ref)
            if base is not None:  # a map delta needs its base map's pack too
                self._need(base.pack, lambda: f"base of a page map of {tree}/{shown(entry.path)} in manifest {seq}")
            what = "database page or page-delta base" if pm.full else "database page"
            # a full map's pages: every one may be a delta's base (each pack once, in page order)
            for pack in dict.fromkeys([loc.rec.pack for loc in pages.values()]):
                self._need(pack, lambda: f"{what} of {tree}/{shown(entry.path)} in manifest {seq}")
