"""``journal diff A B``: the paths added, removed and changed between two checkpoints.

The two trees' index pages are walked side by side, in path order. A page's id
covers its children's ids, so where both sides reach a child page with the same id,
the subtree under it is the same and is skipped unread. A diff thus reads the two
manifests and only the pages on the paths of what changed.

No data pack is read, except to count (``lines``):

* a transcript's added lines: only the segments the newer copy does not share with
  the older one are read (and at most one anchor segment before them). They must
  hash to the older copy's segment ids where the two overlap; a transcript that does
  not extend the older one is marked ``rewritten``, its lines not counted.
* a database's changed pages: compared by the ids its page maps give them
  (``changed_pages``), never by reading a page. A database whose rows changed in
  place often keeps its size.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterator

import msgspec

from .errors import BadBrowsePath, NoGoodCopy
from ..format.index import Said, child_pages, load_child
from ..format.model import KIND_JSONL, KIND_SQLITE, BlobRef, Entry, Manifest
from ..format.objects import KIND_PAGEMAP
from ..format.pagemap import load_snapshot
from ..repository.repository import Repository
from ..repository.segments import read_blobs
from .view import DAMAGE, View
from .where import Where, joined, shown_path, subtree_prune, under

class ChangeKind(enum.StrEnum):
    """How a path differs from checkpoint ``a`` to ``b``. ``--json`` shows these
    values: users' scripts read them, so a value never changes."""

    ADDED = "added"         # only in ``b``
    REMOVED = "removed"     # only in ``a``
    CHANGED = "changed"     # in both, as different entries


class Change(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One path that differs between checkpoints ``a`` and ``b``."""

    path: str                       # TREE/PATH
    change: ChangeKind
    kind: str                       # in ``b`` (in ``a`` when removed)
    size: int                       # in ``b`` (in ``a`` when removed)
    size_change: int                # ``b``'s size minus ``a``'s (an absent side counts 0)
    a: int                          # the checkpoints compared for this path's tree
    b: int
    old_kind: str | None = None     # when the kind changed
    lines_added: int | None = None  # a transcript: complete lines ``b`` holds past ``a``'s bytes
    pages_changed: int | None = None  # a database: pages of ``b`` that are not ``a``'s (and ``a``'s cut off)
    pages: int | None = None        # ... and the pages ``b`` holds
    rewritten: bool = False         # a transcript ``b`` does not extend (lines not counted)


class DiffResult(msgspec.Struct, kw_only=True):
    a: int
    b: int
    changes: list[Change]
    skipped: list[str] = []         # checkpoints passed over past damage (a fallback), and why


class _Damaged(Exception):
    """A page of one side failed its checks (``side``: 0 for ``a``, 1 for ``b``)."""

    def __init__(self, side: int, err: Exception):
        super().__init__(str(err))
        self.side, self.err = side, err


def diff(view: View, a: str, b: str, where: Where = Where(None, ""), lines: bool = True) -> DiffResult:
    """What changed from checkpoint ``a`` to checkpoint ``b`` (each the newest readable
    one at or before what is given, as ``--at`` reads it) under ``where``."""
    seq_a, man_a = next(view.candidates(a, "A"))
    seq_b, man_b = next(view.candidates(b, "B"))
    trees = sorted(set(man_a.trees) | set(man_b.trees)) if where.tree is None else [where.tree]
    if where.tree is not None and where.tree not in man_a.trees and where.tree not in man_b.trees:
        raise BadBrowsePath(view.op, str(where), f"no such tree in checkpoint {seq_a} or {seq_b}; `journal ls` "
                                                 "lists the trees")
    changes: list[Change] = []
    for name in trees:
        changes.extend(_tree_changes(view, name, where.path, [seq_a, seq_b], lines))
    return DiffResult(a=seq_a, b=seq_b, changes=changes, skipped=view.skipped)


def _root(manifest: Manifest, tree: str) -> BlobRef | None:
    got = manifest.trees.get(tree)
    return None if got is None else got.root


def _tree_changes(view: View, tree: str, path: str, seqs: list[int], lines: bool) -> list[Change]:
    """The changes of one tree; a side whose pages are damaged falls back to its newest
    older checkpoint that reads (restore's rule), and the walk starts again (the pages
    already read are kept)."""
    while True:
        roots = [_root(view.manifest(seq), tree) for seq in seqs]
        try:
            pairs = list(_pairs(_Side(view, roots[0], path, 0), _Side(view, roots[1], path, 1)))
        except _Damaged as damaged:
            seqs[damaged.side] = _older(view, seqs[damaged.side], tree, damaged.err)
            continue
        return [_change(view, tree, old, new, seqs, lines) for old, new in pairs
                if under((old or new).path, path)]


def _older(view: View, seq: int, tree: str, err: Exception) -> int:
    view.pass_over(seq, f"tree {tree}", err)
    for old in reversed([s for s in view.seqs if s < seq]):
        try:
            view.manifest(old)
        except DAMAGE:
            continue
        return old
    raise NoGoodCopy(view.op, shown_path(tree, ""), f"checkpoint {seq}'s index is damaged ({err}) and no older "
                                                    "checkpoint reads")


class _Side:
    """One tree being walked: a stack of what is next, in path order (an entry, or a page
    not read yet with what its parent says of it)."""

    def __init__(self, view: View, root: BlobRef | None, path: str, side: int):
        self.view, self.side = view, side
        self.prune = subtree_prune(path)
        self.stack: list = [] if root is None else [(root, None)]

    def head(self):
        return self.stack[-1] if self.stack else None

    def expand(self) -> None:
        ref, said = self.stack.pop()
        try:
            page = load_child(ref, said, self.view.load_page)
        except DAMAGE as err:
            raise _Damaged(self.side, err) from None
        if page.level:
            kids = [kid for kid in child_pages(page, ref, said) if not self.prune(kid[1].first, kid[1].upper)]
            self.stack.extend(reversed(kids))
        else:
            self.stack.extend(reversed(page.entries))


def _key(item) -> tuple[str, float]:
    """Where an item starts, and its level (an entry 0; a root page, whose level is not
    known before it is read, above every other)."""
    if isinstance(item, Entry):
        return item.path, -1
    said: Said | None = item[1]
    return (said.first, said.level) if said is not None else ("", float("inf"))


def _pairs(a: _Side, b: _Side) -> Iterator[tuple[Entry | None, Entry | None]]:
    """The entries that differ between the two sides, in path order, as ``(a's, b's)``
    (None where one side has no such path). Two pages with the same id are skipped,
    unread; otherwise the page that starts first (the higher one, when both start at
    the same path) is read and replaced by its items."""
    while True:
        x, y = a.head(), b.head()
        if x is None and y is None:
            return
        x_entry, y_entry = isinstance(x, Entry), isinstance(y, Entry)
        if x is not None and y is not None and not x_entry and not y_entry and x[0].id == y[0].id:
            a.stack.pop()
            b.stack.pop()
            continue
        if y is None or x is None:
            side, item, entry = (a, x, x_entry) if y is None else (b, y, y_entry)
            if not entry:
                side.expand()
                continue
            side.stack.pop()
            yield (item, None) if side is a else (None, item)
            continue
        (kx, lx), (ky, ly) = _key(x), _key(y)
        if x_entry and y_entry:
            if kx == ky:
                a.stack.pop()
                b.stack.pop()
                if x != y:
                    yield x, y
            elif kx < ky:
                a.stack.pop()
                yield x, None
            else:
                b.stack.pop()
                yield None, y
        elif x_entry and kx < ky:
            a.stack.pop()
            yield x, None
        elif y_entry and ky < kx:
            b.stack.pop()
            yield None, y
        elif y_entry or (not x_entry and (kx, -lx) < (ky, -ly)):
            a.expand()
        else:
            b.expand()


def _change(view: View, tree: str, old: Entry | None, new: Entry | None, seqs: list[int], lines: bool) -> Change:
    both = dict(path=joined(tree, (old or new).path), a=seqs[0], b=seqs[1])
    if new is None:
        return Change(change=ChangeKind.REMOVED, kind=old.kind, size=old.size, size_change=-old.size, **both)
    if old is None:
        change = Change(change=ChangeKind.ADDED, kind=new.kind, size=new.size, size_change=new.size, **both)
    else:
        change = Change(change=ChangeKind.CHANGED, kind=new.kind, size=new.size, size_change=new.size - old.size,
                        old_kind=old.kind if old.kind != new.kind else None, **both)
    if lines and new.kind == KIND_JSONL and (old is None or old.kind == KIND_JSONL):
        try:
            change.lines_added = appended_lines(view.repo, old, new)
        except DAMAGE as err:
            view.reporter.warn(f"{view.op}: {shown_path(tree, new.path)}: cannot count the lines added ({err})")
        else:
            change.rewritten = change.lines_added is None
    if lines and new.kind == KIND_SQLITE and old is not None and old.kind == KIND_SQLITE:
        try:
            change.pages_changed, change.pages = changed_pages(view.repo, old, new)
        except DAMAGE as err:
            view.reporter.warn(f"{view.op}: {shown_path(tree, new.path)}: cannot count the pages changed ({err})")
    return change


def changed_pages(repo: Repository, old: Entry, new: Entry) -> tuple[int, int]:
    """``(changed, pages)``: how many pages of database ``new`` are not ``old``'s page of
    the same number (a page ``old`` lacks, or one ``new`` cut off, counts too), and how
    many ``new`` holds; from the two snapshots' page maps alone (a page's id is its hash)."""
    def read(ref: BlobRef) -> bytes:
        return repo.read_blob(ref, KIND_PAGEMAP)

    before, after = load_snapshot(old.refs, read), load_snapshot(new.refs, read)
    if before.page_size != after.page_size:
        return max(len(before.pages), len(after.pages)), len(after.pages)
    same = sum(a.id == b.id for a, b in zip(before.pages, after.pages))
    return max(len(before.pages), len(after.pages)) - same, len(after.pages)


def appended_lines(repo: Repository, old: Entry | None, new: Entry) -> int | None:
    """How many complete lines transcript ``new`` holds past ``old``'s bytes (all of its
    lines when ``old`` is None). None when ``new`` does not begin with ``old``'s bytes:
    a rewrite.

    Only ``new``'s segments past the ones the two share are read. Each of ``old``'s
    later segments must hash, in ``new``'s bytes, to its own id."""
    old_refs = old.refs if old is not None else ()
    if old is not None and new.size < old.size:
        return None
    shared = 0
    while shared < min(len(old_refs), len(new.refs)) and old_refs[shared].id == new.refs[shared].id:
        shared += 1
    pieces = deque(old_refs[shared:])
    digest, need = repo.codec.hasher(), pieces[0].size if pieces else 0
    count = 0
    for payload in read_blobs(new, repo, start=shared):
        view, off = memoryview(payload), 0
        while pieces and off < len(payload):
            take = min(need, len(payload) - off)
            digest.update(view[off:off + take])
            off, need = off + take, need - take
            if not need:
                if digest.hexdigest() != pieces.popleft().id:
                    return None
                digest, need = repo.codec.hasher(), pieces[0].size if pieces else 0
        count += payload.count(b"\n", off)
    return None if pieces else count
