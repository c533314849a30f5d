"""What verify reads once for every manifest that shares it: index subtrees and page maps.

Checkpoints share most of their index pages and page maps. Verify reads and checks
each distinct one once, and keeps what a later manifest naming it needs to know.
Every tree still passes the checks of ``index.iter_pages`` and every snapshot those of
``pagemap.load_snapshot``, each on its own; only the reading is shared.

**Subtrees** (``TreeAudit``). A page's reference fixes its whole subtree. A subtree
that was walked and passed every check is remembered (``Seen``):

* its page's span, as a parent states it: level, first and last path, entries, bytes;
* the files (entries other than directories) and bytes under it, a manifest's totals;
* its right edge, the last child down to a leaf, which a bound from above must hold;
* its non-directory entries that a later path may lie inside;
* what the caller's leaf hook found in its leaves, and its entries that lie inside a
  non-directory entry (restore refuses those, ``restore/entry.py``).

A later tree naming the same reference checks what its parent says of it against
that, unread. A tree that fails a check is not remembered above the failure, so each
manifest naming it reports it. A walk that would go past the files its manifest says
goes down the subtree again, so it stops where ``iter_pages`` stops.

**Inside a non-directory entry.** In path order, every path under an entry ``x``
starts with ``x`` and a character up to ``/``, so while the walk is in that range
``x`` is *open*: the open entries at any path are a few of its prefixes. A subtree
hands on those still open at its end. Where an entry before a subtree is open at the
subtree's first path, the subtree's pages in that range are read again: only a name
such as ``a`` beside ``a.bak`` at a page boundary makes that happen.

**Page maps** (``MapBook``). A snapshot names a full map and up to two delta maps.
The full map is shared by every snapshot until the next one, so each distinct map is
read once and reduced to a ``MapShape``: its page count and size, which pages a delta
holds, and whether every record it names is in a listed pack long enough for it.
A snapshot is then checked from its maps' shapes. Only when a map names a missing or
short pack are its records read again, to name the ones the snapshot needs.

Both memos are bounded (least recently used dropped first); a dropped one is read
again when it is met again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

from .errors import CorruptObject
from .format.index import LoadPage, Said, child_pages, load_child, page_key, page_span, span_problem, walk_pages
from .format.model import KIND_DIR, MAX_MAPS, BlobRef, Page, TreeRoot, ref_problem
from .format.pagemap import PageLoc, PageMap

#: Subtrees and map shapes kept (least recently used dropped first).
SEEN_KEPT = 1 << 15
SHAPES_KEPT = 1 << 10

#: What a tree's leaf hook found in one leaf page (kept with the subtree).
OnLeaf = Callable[[Page], tuple]
#: Reads one page map: ``(map, its pages, the base it is a delta of or None)``.
ReadMap = Callable[[BlobRef], tuple[PageMap, dict[int, PageLoc], BlobRef | None]]


class Nested(NamedTuple):
    """An entry inside a non-directory entry of its tree, ``parent`` the shortest such."""

    path: str
    parent: str
    kind: str


class Seen(NamedTuple):
    """A subtree that passed every check (see the module docstring)."""

    span: tuple[int, str, str, int, int]      # index.page_span of its page
    last: str                                 # its last path
    files: int                                # entries other than directories under it
    bytes: int                                # ... and their bytes
    edge: tuple[BlobRef, "Seen"] | None       # its last child (None: a leaf)
    opened: tuple[tuple[str, str], ...]       # (path, kind) of entries a later path may lie inside
    notes: tuple                              # the leaf hook's findings, then ``Nested``, in path order


class _Memo(OrderedDict):
    """A bounded map, the least recently used dropped first."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def recall(self, key):
        got = self.get(key)
        if got is not None:
            self.move_to_end(key)
        return got

    def keep(self, key, value) -> None:
        self[key] = value
        if len(self) > self.limit:
            self.popitem(last=False)


def _still_open(parent: str, path: str) -> bool:
    """Whether ``path`` and the paths after it may lie inside ``parent``."""
    return len(path) > len(parent) and path.startswith(parent) and path[len(parent)] <= "/"


class TreeAudit:
    """Checks the trees of many manifests, each distinct subtree read once.

    ``load_page(ref, key)`` reads one page, checked (``index.LoadPage``); ``on_leaf(page)``
    returns what the caller finds in a leaf page read (a tuple, kept with the subtree)."""

    def __init__(self, load_page: LoadPage, on_leaf: OnLeaf, kept: int = SEEN_KEPT):
        self.load_page = load_page
        self.on_leaf = on_leaf
        self.seen = _Memo(kept)

    def check(self, root: BlobRef | None, tree: TreeRoot) -> tuple:
        """Check one tree as ``index.iter_pages`` does (raises ``CorruptObject`` or
        ``ObjectNotFound``); returns what its leaves hold of the leaf hook's findings and
        of ``Nested`` entries, in path order."""
        if root is None:
            if tree.files or tree.bytes:
                raise CorruptObject("tree root", f"an empty tree, its manifest says {tree.files:,} files")
            return ()
        walk = _Walk(self, tree.files)
        seen = walk.visit(root, None)
        if (walk.files, walk.bytes) != (tree.files, tree.bytes):
            raise CorruptObject(f"tree root {root.id[:12]}", f"the tree holds {walk.files:,} files of {walk.bytes:,} "
                                                             f"bytes, its manifest says {tree.files:,} of {tree.bytes:,}")
        return seen.notes


class _Walk:
    """One tree's walk: the files and bytes it has met, in path order."""

    def __init__(self, audit: TreeAudit, limit: int):
        self.audit, self.limit = audit, limit
        self.files = self.bytes = 0

    def visit(self, ref: BlobRef, said: Said | None) -> Seen:
        seen = self.audit.seen.recall(ref)
        if seen is not None and self.files + seen.files <= self.limit:
            _fits(ref, seen, said)
            self.files += seen.files
            self.bytes += seen.bytes
            return seen
        page = load_child(ref, said, self.audit.load_page)
        seen = self._leaf(ref, page) if page.level == 0 else self._inner(ref, page, said)
        self.audit.seen.keep(ref, seen)
        return seen

    def _leaf(self, ref: BlobRef, page: Page) -> Seen:
        files = size = 0
        opened: list[tuple[str, str]] = []
        nested = []
        for e in page.entries:
            path = e.path
            if opened:
                opened = [x for x in opened if _still_open(x[0], path)]
                parent = next((x for x in opened if path[len(x[0])] == "/"), None)
                if parent is not None:
                    nested.append(Nested(path, *parent))
            if e.kind != KIND_DIR:
                files += 1
                size += e.size
                opened.append((path, e.kind))
        self.files += files
        self.bytes += size
        if self.files > self.limit:
            raise CorruptObject(page_key(ref), f"the tree holds more than the {self.limit:,} files its manifest says")
        span = page_span(page)
        return Seen(span, span[2], files, size, None, tuple(opened), self.audit.on_leaf(page) + tuple(nested))

    def _inner(self, ref: BlobRef, page: Page, said: Said | None) -> Seen:
        opened: list[tuple[str, str]] = []
        notes: list = []
        files = size = 0
        edge = None
        for child_ref, child_said in child_pages(page, ref, said):
            child = self.visit(child_ref, child_said)
            opened = [x for x in opened if _still_open(x[0], child.span[1])]
            if opened:
                notes.extend(self._under(child_ref, opened))
            notes.extend(child.notes)
            opened = [x for x in opened if _still_open(x[0], child.last)] + list(child.opened)
            files += child.files
            size += child.bytes
            edge = (child_ref, child)
        return Seen(page_span(page), edge[1].last, files, size, edge, tuple(opened), tuple(notes))

    def _under(self, ref: BlobRef, opened: list[tuple[str, str]]) -> list[Nested]:
        """The entries of the subtree at ``ref`` inside one of ``opened`` (entries before
        it), each with the shortest; its pages in their ranges are read again."""
        ranges = [(x + "/", x + "0") for x, _kind in opened]

        def outside(first: str, upper: str | None) -> bool:
            return not any(first < hi and (upper is None or lo < upper) for lo, hi in ranges)

        out = []
        for _ref, page in walk_pages(ref, self.audit.load_page, outside):
            for e in page.entries:
                parent = next((x for x in opened if e.path.startswith(x[0] + "/")), None)
                if parent is not None:
                    out.append(Nested(e.path, *parent))
        return out


def _fits(ref: BlobRef, seen: Seen, said: Said | None) -> None:
    """Check a remembered subtree where a tree names it, as ``load_child`` would have
    checked each of its pages there: its page against what its parent says (a root's
    reference on its own), then each page of its right edge against the parent's bound."""
    if said is None:
        problem = ref_problem(ref)
        if problem:
            raise CorruptObject("tree root", problem)
        return
    problem = span_problem(seen.span, said)
    if problem:
        raise CorruptObject(page_key(ref), problem)
    edge = seen.edge
    while said.upper is not None and edge is not None:
        child_ref, child = edge
        level, first, last, count, nbytes = child.span
        if last >= said.upper:
            raise CorruptObject(page_key(child_ref), span_problem(child.span, Said(level, first, count, nbytes,
                                                                                   said.upper)))
        edge = child.edge


class MapShape(NamedTuple):
    """What a snapshot's check needs of one page map (``MapBook``)."""

    full: bool
    page_size: int
    page_count: int
    whole: bool                # a full map holding every page below its count (as written)
    pgnos: frozenset[int]      # a delta's pages; a full map's only when it is not whole
    legacy: frozenset[int]     # its version 2 one-page deltas: each needs the full map's page
    sound: bool                # every record it names is in a listed pack, long enough for it

    def holds(self, pgno: int) -> bool:
        """Whether this full map holds page ``pgno``."""
        return pgno < self.page_count and (self.whole or pgno in self.pgnos)


class MapBook:
    """Page maps read once, reduced to their shapes. ``read_map`` reads and decodes one;
    ``packs`` is the store's pack listing (id -> bytes)."""

    def __init__(self, read_map: ReadMap, packs: dict[str, int], kept: int = SHAPES_KEPT):
        self.read_map, self.packs = read_map, packs
        self.shapes = _Memo(kept)

    def load(self, ref: BlobRef) -> tuple[PageMap, dict[int, PageLoc], BlobRef | None]:
        """Read one map (``ReadMap``) and keep its shape."""
        pm, pages, base = self.read_map(ref)
        packs = self.packs
        recs = {id(loc.rec): loc.rec for loc in pages.values()}.values()   # a record's pages share its ref
        sound = all(rec.pack in packs and rec.offset + rec.length <= packs[rec.pack] for rec in recs)
        whole = pm.full and len(pages) == pm.page_count   # every key is below the count: none lacks
        # only a version 2 map lists one-page deltas (``deltas``)
        legacy = frozenset(p for p, loc in pages.items() if loc.legacy) if pm.deltas else frozenset()
        self.shapes.keep(ref, MapShape(pm.full, pm.page_size, pm.page_count, whole,
                                       frozenset() if whole else frozenset(pages), legacy, sound))
        return pm, pages, base

    def shape(self, ref: BlobRef) -> MapShape:
        shape = self.shapes.recall(ref)
        if shape is None:
            self.load(ref)
            shape = self.shapes[ref]
        return shape

    def snapshot(self, refs: tuple[BlobRef, ...]) -> tuple[int, int, bool]:
        """Check a snapshot entry's maps as ``load_snapshot`` does, raising what it raises;
        ``(pages, page size, every map sound)``."""
        if not refs or len(refs) > MAX_MAPS:
            raise CorruptObject("sqlite entry", f"a snapshot entry names {len(refs)} page maps (1 to {MAX_MAPS})")
        base = self.shape(refs[0])
        if not base.full:
            raise CorruptObject(f"pagemap {refs[0].id[:12]}", "first map of a snapshot is not a full map")
        count, sound, deltas = base.page_count, base.sound, []
        for ref in refs[1:]:
            delta = self.shape(ref)
            key = f"pagemap {ref.id[:12]}"
            if delta.full or delta.page_size != base.page_size:
                raise CorruptObject(key, "a later map of a snapshot is not a delta over the first")
            if not all(base.holds(p) for p in delta.legacy):
                raise CorruptObject(key, "a page delta has no base page in the full map")
            deltas.append(delta.pgnos)
            count, sound = delta.page_count, sound and delta.sound
        missing = _first_missing(count, base, deltas)
        if missing is not None:
            raise CorruptObject(f"pagemap {refs[-1].id[:12]}", f"page {missing} of {count} is missing")
        return count, base.page_size, sound


def _first_missing(count: int, base: MapShape, deltas: list[frozenset[int]]) -> int | None:
    """The first page below ``count`` that neither the full map nor a delta holds, or
    None; it looks at no more pages than the maps hold."""
    held = set().union(*deltas)
    start = base.page_count if base.whole else 0
    if not base.whole:
        held |= base.pgnos
    if count - start <= len(held):
        return min(set(range(start, count)) - held, default=None)
    pgno = start   # more pages than the maps hold: one is missing, within len(held) + 1 of start
    while pgno in held:
        pgno += 1
    return pgno
