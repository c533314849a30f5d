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

import bisect
import hashlib
import operator
from collections.abc import Callable, Iterator
from typing import NamedTuple

import msgspec

from ..errors import CorruptObject

from .codec import PLAIN, Codec
from .model import (KIND_DIR, MAX_ITEMS, BlobRef, Entry, Page, PageRef, TreeRoot, encode, entry_problem, is_pending,
                    ref_problem)
from .objects import KIND_PAGE, blob_id

_SIZE = operator.attrgetter("size")
_PATH = operator.attrgetter("path")

LEAF_FANOUT = 64        # average entries per leaf page
INNER_FANOUT = 32       # average children per inner page

#: Stores a new page: ``add_page(payload, (level, first path)) -> BlobRef``.
AddPage = Callable[[bytes, tuple[int, str]], BlobRef]


def _boundary(name: str, level: int, fanout: int, key: bytes = b"") -> bool:
    """Whether a page ends after ``name``: a BLAKE2b of it, keyed in an encrypted store
    (``Codec.boundary_key``), so page lengths say nothing about path names there."""
    digest = hashlib.blake2b(f"{level}:{name}".encode("utf-8", "surrogateescape"), digest_size=4, key=key).digest()
    return int.from_bytes(digest, "big") % fanout == 0


def _chunk(items: list, names: list[str], level: int, fanout: int, key: bytes) -> tuple[list[list], bool]:
    """``(groups, by_boundary)``: the items cut after each boundary name and at
    ``MAX_ITEMS``; when that would give one group per item (every name a boundary),
    cut by count instead (``by_boundary`` False)."""
    groups, current = [], []
    for item, name in zip(items, names):
        current.append(item)
        if _boundary(name, level, fanout, key) or len(current) >= MAX_ITEMS:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    if len(groups) == len(items) and len(items) > 1:
        return [items[i:i + fanout] for i in range(0, len(items), fanout)], False
    return groups, True


def _emit(page: Page, first: str, known: dict[str, BlobRef], used: dict[str, BlobRef], add_page: AddPage,
          keys: dict[str, tuple[int, str]] | None, codec: Codec) -> BlobRef:
    payload = encode(page)
    pid = blob_id(payload, codec)
    ref = known.get(pid) or used.get(pid) or _stored_as_same_pack(page, known, codec) \
        or add_page(payload, (page.level, first))
    used[ref.id] = ref
    if keys is not None:
        keys[ref.id] = (page.level, first)
    return ref


def _stored_as_same_pack(page: Page, known: dict[str, BlobRef], codec: Codec) -> BlobRef | None:
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
        ref = known.get(blob_id(encode(Page(level=page.level, children=local)), codec))
        if ref is not None and ref.pack == pack:
            return ref
    return None


class Previous(NamedTuple):
    """The tree's last index, for ``build_index`` to take back its leaf pages whose
    entries did not change without encoding or hashing them again (design §8).

    ``leaves``: the first path of each leaf page of that index, to the page's ref;
    ``differ``: sorted, every path whose entry is not the very entry that index holds
    (new, changed) and every path it holds that the new entries do not (gone). It
    MUST describe an index built with the same codec as the new one."""

    leaves: dict[str, BlobRef]
    differ: list[str]


class Built(NamedTuple):
    """A tree's index as ``build_index`` or ``update_index`` made it."""

    root: BlobRef | None        # None for an empty tree
    used: dict[str, BlobRef]    # every page the index uses, by id


def build_index(entries: list[Entry], known: dict[str, BlobRef], add_page: AddPage,
                keys: dict[str, tuple[int, str]] | None = None,
                codec: Codec = PLAIN, previous: Previous | None = None) -> Built:
    """Build the page tree of ``entries`` (sorted by path); page ids are ``codec``'s.

    ``known`` maps page ids already in the store to their refs; only pages not in it
    go through ``add_page(payload, (level, first path)) -> BlobRef``. Returns the root
    ref (``None`` for an empty tree) and every page the tree uses, by id; ``keys``, if
    given, receives each used page's ``(level, first path)``: a page that replaces it
    in a later tree has the same key as long as the boundary before it stays.
    ``previous``: the last index of the same tree, whose unchanged leaf pages are
    taken back as they are (``_same_leaf``).
    """
    if not entries:
        return Built(None, {})
    used: dict[str, BlobRef] = {}
    level_items: list[PageRef] = []
    groups, by_boundary = _leaves(entries, [e.path for e in entries], previous, codec.boundary_key)
    if previous is not None and not (by_boundary and _cut_by_boundary(groups, previous)):
        previous = None
    for n, group in enumerate(groups):
        first = group[0].path
        ref = None if previous is None else _same_leaf(group, n == len(groups) - 1, previous, codec)
        if ref is None:
            ref = _emit(Page(level=0, entries=tuple(group)), first, known, used, add_page, keys, codec)
        else:
            used[ref.id] = ref
            if keys is not None:
                keys[ref.id] = (0, first)
        level_items.append(PageRef(first, ref, len(group), sum(map(_SIZE, group))))
    return Built(_upper(level_items, known, used, add_page, keys, codec), used)


def _upper(level_items: list[PageRef], known: dict[str, BlobRef], used: dict[str, BlobRef], add_page: AddPage,
           keys: dict[str, tuple[int, str]] | None, codec: Codec) -> BlobRef:
    """The inner pages over the leaves ``level_items`` (one or more), up to the root; its ref."""
    level = 1
    while len(level_items) > 1:
        next_items = []
        for group in _chunk(level_items, [c.first for c in level_items], level, INNER_FANOUT,
                            codec.boundary_key)[0]:
            children = tuple(_same_pack(c) for c in group)
            ref = _emit(Page(level=level, children=children), group[0].first, known, used, add_page, keys, codec)
            next_items.append(PageRef(group[0].first, ref, sum(c.files for c in group), sum(c.bytes for c in group)))
        level_items = next_items
        level += 1
    return level_items[0].ref


class Update(NamedTuple):
    """A tree's last index and what changed since, for ``update_index`` (design §8).

    ``root``: that index's root. ``differ``: sorted, every path whose entry is not the
    one that index holds (new, changed) and every path it holds that the tree no longer
    does (gone); every other path MUST hold the very entry the index holds. ``entry``:
    a ``differ`` path's entry now, None when it is gone. The index MUST have been built
    with the same codec as the new one."""

    root: BlobRef
    differ: list[str]
    entry: Callable[[str], Entry | None]


def update_index(update: Update, load_page: LoadPage, known: dict[str, BlobRef], add_page: AddPage,
                 keys: dict[str, tuple[int, str]] | None = None,
                 codec: Codec = PLAIN) -> Built | None:
    """Rebuild a tree's index from its last one (``update``), reading only the leaves
    a changed path falls in.

    The last index's inner pages are read and checked as a walk checks them. Each
    touched leaf is cut again from its first path; the cut runs on into the next leaf
    until it ends where an old leaf ended. Leaf ends depend only on the paths, so the
    result equals ``build_index`` of the whole tree (design §8).

    Returns an empty ``Built`` when every path is gone. Returns None when equality
    cannot be shown: a leaf not in ``known``, or an index that may have been cut by
    count; the caller then builds whole. Raises ``CorruptObject`` for a bad page."""
    leaves: list[tuple[BlobRef, Said]] = []
    pages: dict[int, Page] = {}
    stack: list[tuple[BlobRef, Said | None]] = [(update.root, None)]
    while stack:
        ref, said = stack.pop()
        if said is not None and said.level == 0:
            leaves.append((ref, said))
            continue
        page = load_child(ref, said, load_page)
        if page.level == 0:  # the root is the one leaf
            _level, first, _last, count, nbytes = page_span(page)
            pages[len(leaves)] = page
            leaves.append((ref, Said(0, first, count, nbytes, None)))
            continue
        stack.extend(reversed(child_pages(page, ref, said)))
    held = []
    for ref, said in leaves:
        ref = known.get(ref.id)
        if ref is None:
            return None
        held.append(ref)
    key = codec.boundary_key
    if not any(said.files >= 2 and not _boundary(said.first, 0, LEAF_FANOUT, key) for _, said in leaves):
        return None  # cut by count, or cannot be told from it
    firsts = [said.first for _, said in leaves]
    differ = update.differ
    touched = {max(bisect.bisect_right(firsts, path) - 1, 0) for path in differ}
    used: dict[str, BlobRef] = {}
    level_items: list[PageRef] = []
    i, n = 0, len(leaves)
    while i < n:
        if i not in touched:
            said = leaves[i][1]
            used[held[i].id] = held[i]
            if keys is not None:
                keys[held[i].id] = (0, said.first)
            level_items.append(PageRef(said.first, held[i], said.files, said.bytes))
            i += 1
            continue
        current: list[Entry] = []
        while True:
            for entry in _changed_leaf(i, leaves, pages, firsts, differ, update.entry, load_page):
                current.append(entry)
                if _boundary(entry.path, 0, LEAF_FANOUT, key) or len(current) >= MAX_ITEMS:
                    level_items.append(_leaf(current, known, used, add_page, keys, codec))
                    current = []
            i += 1
            if i == n or (not current and i not in touched):
                break
        if current:  # the tree's last leaf, ended by its entries
            level_items.append(_leaf(current, known, used, add_page, keys, codec))
    if not level_items:
        return Built(None, {})
    if len(level_items) > 1 and all(item.files == 1 for item in level_items):
        return None
    return Built(_upper(level_items, known, used, add_page, keys, codec), used)


def _changed_leaf(i: int, leaves: list[tuple[BlobRef, Said]], pages: dict[int, Page], firsts: list[str],
                  differ: list[str], entry_of: Callable[[str], Entry | None], load_page: LoadPage) -> list[Entry]:
    """Leaf ``i``'s entries now, in path order: those it held, with each ``differ`` path
    from its first path to before the next leaf's (from the start for the first leaf)
    set to its entry now or dropped."""
    page = pages.get(i)
    if page is None:
        ref, said = leaves[i]
        page = load_child(ref, said, load_page)
    lo = bisect.bisect_left(differ, firsts[i]) if i else 0
    hi = bisect.bisect_left(differ, firsts[i + 1]) if i + 1 < len(firsts) else len(differ)
    if lo == hi:
        return list(page.entries)
    by_path = {e.path: e for e in page.entries}
    for path in differ[lo:hi]:
        entry = entry_of(path)
        if entry is None:
            by_path.pop(path, None)
        else:
            by_path[path] = entry
    return sorted(by_path.values(), key=_PATH)


def _leaf(group: list[Entry], known: dict[str, BlobRef], used: dict[str, BlobRef], add_page: AddPage,
          keys: dict[str, tuple[int, str]] | None, codec: Codec) -> PageRef:
    first = group[0].path
    ref = _emit(Page(level=0, entries=tuple(group)), first, known, used, add_page, keys, codec)
    return PageRef(first, ref, len(group), sum(map(_SIZE, group)))


def _leaves(entries: list[Entry], names: list[str], previous: Previous | None, key: bytes) -> tuple[list[list], bool]:
    """``_chunk`` of the entries into leaves, level 0, without hashing the paths of a run
    the last index held as one leaf: a run from a leaf's first path up to the next
    leaf's, two paths or more, none of them differing (``previous.differ``: new, changed
    or gone), at the start of a group. That leaf was cut after its last path at a
    boundary or at ``MAX_ITEMS`` and at none before, and boundaries depend only on the
    paths, so the full cut ends the group there too. It holds only if the last index
    was cut by boundaries, not by count (where every path is a boundary): checked once,
    on the first run taken, by hashing its first path, which then must be none."""
    if previous is None or len(previous.leaves) < 2:
        return _chunk(entries, names, 0, LEAF_FANOUT, key)
    firsts = sorted(previous.leaves)
    following = dict(zip(firsts, firsts[1:]))
    differ = previous.differ
    groups, current, i, proven = [], [], 0, False
    while i < len(entries):
        name = names[i]
        after = following.get(name) if not current else None
        if after is not None:
            end = bisect.bisect_left(names, after, i + 1)
            d = bisect.bisect_left(differ, name)
            if end < len(names) and names[end] == after and 2 <= end - i <= MAX_ITEMS \
                    and (d == len(differ) or differ[d] >= after) \
                    and (proven or not _boundary(name, 0, LEAF_FANOUT, key)):
                proven = True
                groups.append(entries[i:end])
                i = end
                continue
        current.append(entries[i])
        if _boundary(name, 0, LEAF_FANOUT, key) or len(current) >= MAX_ITEMS:
            groups.append(current)
            current = []
        i += 1
    if current:
        groups.append(current)
    if len(groups) == len(entries) and len(entries) > 1:
        return [entries[i:i + LEAF_FANOUT] for i in range(0, len(entries), LEAF_FANOUT)], False
    return groups, True


def _cut_by_boundary(groups: list[list[Entry]], previous: Previous) -> bool:
    """Whether the last index's leaves were cut by boundaries, not by count (``_chunk``
    cuts by count when every path but the last is a boundary): some path it held, and
    not as its last, is no boundary. The first path of a group of two or more that the
    new build cut by boundaries is none; when it and the second are held as they were,
    the last index held a path after it."""
    differ = set(previous.differ)
    return any(len(group) >= 2 and group[0].path not in differ and group[1].path not in differ
               for group in groups)


def _same_leaf(group: list[Entry], last: bool, previous: Previous, codec: Codec) -> BlobRef | None:
    """The last index's leaf page that holds exactly ``group``, else None; both builds
    cut their leaves by boundaries (``_chunk``, ``_cut_by_boundary``).

    Page ends depend only on the paths, so the last index's leaf that started at
    ``group``'s first path ran through the same paths and ended where ``group`` ends,
    when: no path from its first to its last differs (none is new, changed or gone),
    and ``group`` ended at a boundary or at ``MAX_ITEMS``, or no path after it differs
    either (the tree's last group may end only because the entries do, where the old
    leaf may have gone on)."""
    first, last_path = group[0].path, group[-1].path
    ref = previous.leaves.get(first)
    if ref is None:
        return None
    differ = previous.differ
    i = bisect.bisect_left(differ, first)
    if i < len(differ) and (differ[i] <= last_path or last and len(group) < MAX_ITEMS
                            and not _boundary(last_path, 0, LEAF_FANOUT, codec.boundary_key)):
        return None
    return ref


def _same_pack(child: PageRef) -> PageRef:
    if not is_pending(child.ref.pack):
        return child
    return PageRef(child.first, msgspec.structs.replace(child.ref, pack=""), child.files, child.bytes)


_decode_page = msgspec.json.Decoder(Page).decode


def decode_page(payload: bytes, key: str, sound: Callable[[Entry | PageRef], bool] | None = None) -> Page:
    """Decode one index page read from the store and check it (``page_problem``; an
    entry or child ``sound`` says was checked before, in another page, is not checked
    again); raises ``CorruptObject(key)``."""
    try:
        page = _decode_page(payload)
    except msgspec.DecodeError as err:  # a ValidationError (a field out of range) is one too
        raise CorruptObject(key, f"page does not decode: {err}") from None
    problem = page_problem(page, sound)
    if problem:
        raise CorruptObject(key, problem)
    return page


def page_problem(page: Page, sound: Callable[[Entry | PageRef], bool] | None = None) -> str | None:
    """What is wrong with a decoded page, or None: a leaf holds entries and an inner page
    children, never both, never neither; items are in strictly ascending path order
    (no path twice); every entry and child reference is sound (``model.entry_problem``,
    ``model.ref_problem``; an entry or child ``sound(item)`` vouches for is taken as it is)."""
    items = page.children if page.level else page.entries
    if not items or (page.entries and page.children):
        return f"a level {page.level} page holds {len(page.entries)} entries and {len(page.children)} children"
    last = None
    if page.level:
        for child in page.children:
            if last is not None and child.first <= last:
                return f"children out of order at {child.first!r}"
            last = child.first
            problem = None if sound is not None and sound(child) else ref_problem(child.ref, same_pack=True)
            if problem:
                return f"child page {child.first!r} {problem}"
        return None
    for entry in page.entries:
        if last is not None and entry.path <= last:
            return f"entry {entry.path!r} is listed twice or out of order"
        last = entry.path
        problem = None if sound is not None and sound(entry) else entry_problem(entry)
        if problem:
            return f"entry {entry.path!r} {problem}"
    return None


class Said(NamedTuple):
    """What an inner page says of one child: its level (one below its own), first path,
    entries and bytes, and the next child's first path, which bounds it (None: no bound)."""

    level: int
    first: str
    files: int
    bytes: int
    upper: str | None


#: Reads one page and decodes it, checked (``decode_page``): ``load_page(ref, key)``.
LoadPage = Callable[[BlobRef, str], Page]
#: A partial walk: ``prune(first, upper)`` is True for a child page (spanning paths from
#: ``first`` to before ``upper``) that the walk may skip unread.
Prune = Callable[[str, str | None], bool]


def page_key(ref: BlobRef) -> str:
    """How errors name one index page."""
    return f"page {ref.id[:12]} in pack {ref.pack[:12]}"


def page_span(page: Page) -> tuple[int, str, str, int, int]:
    """What a parent must say of a page: its level, first and last path, entries and bytes."""
    if page.level:
        kids = page.children
        return page.level, kids[0].first, kids[-1].first, sum(c.files for c in kids), sum(c.bytes for c in kids)
    items = page.entries
    return 0, items[0].path, items[-1].path, len(items), sum(e.size for e in items)


def span_problem(span: tuple[int, str, str, int, int], said: Said) -> str | None:
    """How a page (its ``page_span``) differs from what its parent says of it, or None."""
    level, first, last, count, nbytes = span
    if level != said.level:
        return f"a level {level} page where its parent says level {said.level}"
    if first != said.first or (said.upper is not None and last >= said.upper):
        return f"the page spans {first!r} to {last!r}, its parent says from {said.first!r} to before {said.upper!r}"
    if (count, nbytes) != (said.files, said.bytes):
        return f"the page holds {count:,} entries of {nbytes:,} bytes, its parent says {said.files:,} of {said.bytes:,}"
    return None


def child_pages(page: Page, ref: BlobRef, said: Said | None) -> list[tuple[BlobRef, Said]]:
    """An inner page's children in path order, each with what the page says of it (a
    same-pack reference resolved to the pack ``ref`` names)."""
    children = page.children
    out = []
    for i, child in enumerate(children):
        upper = children[i + 1].first if i + 1 < len(children) else (said.upper if said else None)
        child_ref = child.ref if child.ref.pack else msgspec.structs.replace(child.ref, pack=ref.pack)
        out.append((child_ref, Said(page.level - 1, child.first, child.files, child.bytes, upper)))
    return out


def load_child(ref: BlobRef, said: Said | None, load_page: LoadPage) -> Page:
    """One page of a walk, checked on its own and against what its parent says of it
    (``said``; None for a root, whose reference is checked instead); raises
    ``CorruptObject``."""
    if said is None:
        problem = ref_problem(ref)
        if problem:
            raise CorruptObject("tree root", problem)
    key = page_key(ref)
    page = load_page(ref, key)
    problem = said and span_problem(page_span(page), said)
    if problem:
        raise CorruptObject(key, problem)
    return page


def walk_pages(root: BlobRef, load_page: LoadPage, prune: Prune | None = None) -> Iterator[tuple[BlobRef, Page]]:
    """Yield the pages of the tree under ``root``, depth first, in path order, each
    checked (``load_child``). With ``prune``, a child page is skipped unread when
    ``prune(first, upper)`` says so; it is asked when the walk reaches that child, after
    every page before it was yielded (so it may depend on what the caller saw)."""
    stack: list[tuple[BlobRef, Said | None]] = [(root, None)]
    while stack:
        ref, said = stack.pop()
        if prune is not None and said is not None and prune(said.first, said.upper):
            continue
        page = load_child(ref, said, load_page)
        yield ref, page
        if page.level:
            stack.extend(reversed(child_pages(page, ref, said)))


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
    files = size = 0
    for ref, page in walk_pages(root, lambda r, key: decode_page(read_page(r), key)):
        if tree is not None and not page.level:
            for entry in page.entries:
                if entry.kind != KIND_DIR:
                    files += 1
                    size += entry.size
            if files > tree.files:
                raise CorruptObject(page_key(ref), f"the tree holds more than the {tree.files:,} files its "
                                                   "manifest says")
        yield ref, page
    if tree is not None and (files, size) != (tree.files, tree.bytes):
        raise CorruptObject(f"tree root {root.id[:12]}", f"the tree holds {files:,} files of {size:,} bytes, its "
                                                         f"manifest says {tree.files:,} of {tree.bytes:,}")


def load_entries(root: BlobRef | None, read_page: Callable[[BlobRef], bytes],
                 tree: TreeRoot | None = None) -> tuple[list[Entry], dict[str, BlobRef]]:
    """Every entry of the tree in path order, and every page it uses, by id. The
    entries hold one object per pack name and mode (``shared_values``)."""
    entries: list[Entry] = []
    pages: dict[str, BlobRef] = {}
    shared: dict = {}
    for ref, page in iter_pages(root, read_page, tree):
        pages[ref.id] = ref
        entries.extend(shared_values(page.entries, shared))
    return entries, pages


def shared_values(entries: tuple[Entry, ...], shared: dict) -> Iterator[Entry]:
    """``entries``, each made anew where it holds a value ``shared`` holds another object
    for: a pack name, a mode, a blob's size (the entry's own when equal). A page decodes
    new objects for each, and a restore holds every entry of the tree (200,000 files:
    35 MB of pack names and ints, where the store has a few hundred packs and modes).
    ``shared`` maps each such value to its one object."""
    for entry in entries:
        refs, mode = entry.refs, shared.setdefault(entry.mode, entry.mode)
        if refs:
            size = entry.size
            refs = tuple(BlobRef(r.id, shared.setdefault(r.pack, r.pack), r.offset, r.length,
                                 size if r.size == size else r.size) for r in refs)
        if mode is not entry.mode or refs is not entry.refs:
            entry = msgspec.structs.replace(entry, mode=mode, refs=refs)
        yield entry


__all__ = ["KIND_PAGE", "MAX_ITEMS", "Said", "Update", "build_index", "update_index", "child_pages", "decode_page", "iter_pages", "load_child",
           "load_entries", "page_key", "shared_values", "page_span", "span_problem", "walk_pages"]
