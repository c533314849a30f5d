"""Tree indexes: a tree's entries as a content-defined tree of pages.

Page boundaries depend only on the paths at them (a hash of the path), never on
positions, so changing, adding or removing one file changes only the pages on its
path from leaf to root. A checkpoint that changes k files therefore writes O(k log n)
small pages, and every unchanged page is reused by its id.

All new pages of one checkpoint go into one pack, whose name (its hash) is known only
once it is closed. So an inner page names a child page written in the same pack with
an empty ``pack`` field, meaning "the pack this page was read from".
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator

import msgspec

from .errors import CorruptObject

from .model import BlobRef, Entry, Page, PageRef, decode, encode
from .objects import KIND_PAGE, blob_id
from .pack import is_pending

LEAF_FANOUT = 64        # average entries per leaf page
INNER_FANOUT = 32       # average children per inner page
MAX_ITEMS = 1024        # hard cap per page, whatever the hashes say

#: Stores a new page: ``add_page(payload, (level, first path)) -> BlobRef``.
AddPage = Callable[[bytes, tuple[int, str]], BlobRef]


def _boundary(name: str, level: int, fanout: int) -> bool:
    digest = hashlib.blake2b(f"{level}:{name}".encode("utf-8", "surrogateescape"), digest_size=4).digest()
    return int.from_bytes(digest, "big") % fanout == 0


def _chunk(items: list, names: list[str], level: int, fanout: int) -> list[list]:
    groups, current = [], []
    for item, name in zip(items, names):
        current.append(item)
        if _boundary(name, level, fanout) or len(current) >= MAX_ITEMS:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    if len(groups) == len(items) and len(items) > 1:
        groups = [items[i:i + fanout] for i in range(0, len(items), fanout)]
    return groups


def _emit(page: Page, first: str, known: dict[str, BlobRef], used: dict[str, BlobRef], add_page: AddPage,
          keys: dict[str, tuple[int, str]] | None) -> BlobRef:
    payload = encode(page)
    pid = blob_id(payload)
    ref = known.get(pid) or used.get(pid) or _stored_as_same_pack(page, known) or add_page(payload, (page.level, first))
    used[ref.id] = ref
    if keys is not None:
        keys[ref.id] = (page.level, first)
    return ref


def _stored_as_same_pack(page: Page, known: dict[str, BlobRef]) -> BlobRef | None:
    """The stored copy of an inner page whose children sit in the pack it was written
    to: there it names them with an empty ``pack`` (same pack), so the page as built
    now, naming that pack, has another id. Without this, every inner page written by
    one checkpoint would be written again, unchanged, by the next."""
    packs = {c.ref.pack for c in page.children}
    if "" in packs or any(is_pending(p) for p in packs):
        return None  # a new child: the page is new
    for pack in packs:
        local = tuple(PageRef(c.first, msgspec.structs.replace(c.ref, pack=""), c.files, c.bytes)
                      if c.ref.pack == pack else c for c in page.children)
        ref = known.get(blob_id(encode(Page(level=page.level, children=local))))
        if ref is not None and ref.pack == pack:
            return ref
    return None


def build_index(entries: list[Entry], known: dict[str, BlobRef], add_page: AddPage,
                keys: dict[str, tuple[int, str]] | None = None) -> tuple[BlobRef | None, dict[str, BlobRef]]:
    """Build the page tree of ``entries`` (sorted by path).

    ``known`` maps page ids already in the store to their refs; only pages not in it
    go through ``add_page(payload, (level, first path)) -> BlobRef``. Returns the root
    ref (``None`` for an empty tree) and every page the tree uses, by id; ``keys``, if
    given, receives each used page's ``(level, first path)``: a page that replaces it
    in a later tree has the same key as long as the boundary before it stays.
    """
    used: dict[str, BlobRef] = {}
    if not entries:
        return None, used
    level_items: list[PageRef] = []
    for group in _chunk(entries, [e.path for e in entries], 0, LEAF_FANOUT):
        ref = _emit(Page(level=0, entries=tuple(group)), group[0].path, known, used, add_page, keys)
        level_items.append(PageRef(group[0].path, ref, len(group), sum(e.size for e in group)))
    level = 1
    while len(level_items) > 1:
        next_items = []
        for group in _chunk(level_items, [c.first for c in level_items], level, INNER_FANOUT):
            children = tuple(_same_pack(c) for c in group)
            ref = _emit(Page(level=level, children=children), group[0].first, known, used, add_page, keys)
            next_items.append(PageRef(group[0].first, ref, sum(c.files for c in group), sum(c.bytes for c in group)))
        level_items = next_items
        level += 1
    return level_items[0].ref, used


def _same_pack(child: PageRef) -> PageRef:
    if not is_pending(child.ref.pack):
        return child
    return PageRef(child.first, msgspec.structs.replace(child.ref, pack=""), child.files, child.bytes)


def iter_pages(root: BlobRef | None, read_page: Callable[[BlobRef], bytes]) -> Iterator[tuple[BlobRef, Page]]:
    """Yield every page of the tree under ``root``, depth first, in path order."""
    if root is None:
        return
    stack = [root]
    while stack:
        ref = stack.pop()
        try:
            page = decode(read_page(ref), Page)
        except msgspec.DecodeError as err:
            raise CorruptObject(f"page {ref.id[:12]} in pack {ref.pack[:12]}", f"page does not decode: {err}") from err
        yield ref, page
        stack.extend(reversed([c.ref if c.ref.pack else msgspec.structs.replace(c.ref, pack=ref.pack)
                               for c in page.children]))


def load_entries(root: BlobRef | None, read_page: Callable[[BlobRef], bytes]) -> tuple[list[Entry], dict[str, BlobRef]]:
    """Every entry of the tree in path order, and every page it uses, by id."""
    entries: list[Entry] = []
    pages: dict[str, BlobRef] = {}
    for ref, page in iter_pages(root, read_page):
        pages[ref.id] = ref
        entries.extend(page.entries)
    return entries, pages


__all__ = ["KIND_PAGE", "build_index", "iter_pages", "load_entries"]
