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

from ..errors import CorruptObject

from .model import KIND_DIR, MAX_ITEMS, BlobRef, Entry, Page, PageRef, TreeRoot, encode, entry_problem, ref_problem
from .objects import KIND_PAGE, blob_id
from ..repository.pack import is_pending

LEAF_FANOUT = 64        # average entries per leaf page
INNER_FANOUT = 32       # average children per inner page

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


_decode_page = msgspec.json.Decoder(Page).decode


def decode_page(payload: bytes, key: str) -> Page:
    """Decode one index page read from the store and check it (``page_problem``);
    raises ``CorruptObject(key)``."""
    try:
        page = _decode_page(payload)
    except msgspec.DecodeError as err:  # a ValidationError (a field out of range) is one too
        raise CorruptObject(key, f"page does not decode: {err}") from None
    problem = page_problem(page)
    if problem:
        raise CorruptObject(key, problem)
    return page


def page_problem(page: Page) -> str | None:
    """What is wrong with a decoded page, or None: a leaf holds entries and an inner page
    children, never both, never neither; items are in strictly ascending path order
    (no path twice); every entry and child reference is sound (``model.entry_problem``)."""
    items = page.children if page.level else page.entries
    if not items or (page.entries and page.children):
        return f"a level {page.level} page holds {len(page.entries)} entries and {len(page.children)} children"
    last = None
    if page.level:
        for child in page.children:
            if last is not None and child.first <= last:
                return f"children out of order at {child.first!r}"
            last = child.first
            problem = ref_problem(child.ref, same_pack=True)
            if problem:
                return f"child page {child.first!r} {problem}"
        return None
    for entry in page.entries:
        if last is not None and entry.path <= last:
            return f"entry {entry.path!r} is listed twice or out of order"
        last = entry.path
        problem = entry_problem(entry)
        if problem:
            return f"entry {entry.path!r} {problem}"
    return None


def iter_pages(root: BlobRef | None, read_page: Callable[[BlobRef], bytes],
               tree: TreeRoot | None = None) -> Iterator[tuple[BlobRef, Page]]:
    """Yield every page of the tree under ``root``, depth first, in path order, each
    checked (``decode_page``) and checked against its parent; raises ``CorruptObject``.

    A parent states each child's level (one below its own), first path, entry count and
    bytes, and the next child's first path bounds it: so every path of the tree is listed
    once, in order, and no page can be reached twice (a repeated child breaks the bounds,
    a cycle the levels): the walk reads each page once, its work bounded by the pages
    stored, however many times the pages name one another. With
    ``tree`` (the manifest's totals), the files (entries other than directories) and
    their bytes must add up to its ``files`` and ``bytes``; the walk stops as soon as it
    has seen more files.
    """
    if root is None:
        if tree is not None and (tree.files or tree.bytes):
            raise CorruptObject("tree root", f"an empty tree, its manifest says {tree.files:,} files")
        return
    problem = ref_problem(root)
    if problem:
        raise CorruptObject("tree root", problem)
    files = size = 0
    # (ref, what the parent says: level, first path, entries, bytes, and the next child's first path)
    stack: list[tuple[BlobRef, tuple | None]] = [(root, None)]
    while stack:
        ref, said = stack.pop()
        key = f"page {ref.id[:12]} in pack {ref.pack[:12]}"
        page = decode_page(read_page(ref), key)
        problem = said and _disagrees(page, *said)
        if problem:
            raise CorruptObject(key, problem)
        if tree is not None and not page.level:
            for entry in page.entries:
                if entry.kind != KIND_DIR:
                    files += 1
                    size += entry.size
            if files > tree.files:
                raise CorruptObject(key, f"the tree holds more than the {tree.files:,} files its manifest says")
        yield ref, page
        children = page.children
        for i in reversed(range(len(children))):
            child = children[i]
            upper = children[i + 1].first if i + 1 < len(children) else (said[4] if said else None)
            child_ref = child.ref if child.ref.pack else msgspec.structs.replace(child.ref, pack=ref.pack)
            stack.append((child_ref, (page.level - 1, child.first, child.files, child.bytes, upper)))
    if tree is not None and (files, size) != (tree.files, tree.bytes):
        raise CorruptObject(f"tree root {root.id[:12]}", f"the tree holds {files:,} files of {size:,} bytes, its "
                                                         f"manifest says {tree.files:,} of {tree.bytes:,}")


def _disagrees(page: Page, level: int, first: str, count: int, nbytes: int, upper: str | None) -> str | None:
    """How a page differs from what its parent says of it, or None."""
    if page.level != level:
        return f"a level {page.level} page where its parent says level {level}"
    if page.level:
        got = (page.children[0].first, page.children[-1].first,
               sum(c.files for c in page.children), sum(c.bytes for c in page.children))
    else:
        got = (page.entries[0].path, page.entries[-1].path, len(page.entries), sum(e.size for e in page.entries))
    if got[0] != first or (upper is not None and got[1] >= upper):
        return f"the page spans {got[0]!r} to {got[1]!r}, its parent says from {first!r} to before {upper!r}"
    if got[2:] != (count, nbytes):
        return f"the page holds {got[2]:,} entries of {got[3]:,} bytes, its parent says {count:,} of {nbytes:,}"
    return None


def load_entries(root: BlobRef | None, read_page: Callable[[BlobRef], bytes],
                 tree: TreeRoot | None = None) -> tuple[list[Entry], dict[str, BlobRef]]:
    """Every entry of the tree in path order, and every page it uses, by id."""
    entries: list[Entry] = []
    pages: dict[str, BlobRef] = {}
    for ref, page in iter_pages(root, read_page, tree):
        pages[ref.id] = ref
        entries.extend(page.entries)
    return entries, pages


__all__ = ["KIND_PAGE", "MAX_ITEMS", "build_index", "decode_page", "iter_pages", "load_entries"]
