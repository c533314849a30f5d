"""``journal find PATTERN``: for each path whose name matches a glob, the checkpoints
that hold it and where it changed, newest first.

The one command that reads every manifest (from ``--since`` on) and every tree in
them: but a page is read once however many checkpoints share it (the same id: the
same subtree). Each page's matches are kept by id, so a later checkpoint sharing it
costs a lookup, and checking it against what its parent says of it, never a read. A
checkpoint whose manifest or index cannot be read is passed over with a warning (the
answer leaves it out; the command exits 3).
"""

from __future__ import annotations

import fnmatch

import msgspec

from ..errors import BadBrowsePath, CorruptObject
from ..format.index import child_pages, load_child, page_key, page_span, span_problem
from ..format.model import BlobRef, Entry
from ..repository.history import parse_at
from .view import DAMAGE, View
from .where import joined


class Version(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One state of a path over a run of checkpoints (those that could be read)."""

    first: int                      # the checkpoint where it became this: where it changed
    last: int                       # the newest checkpoint where it still is this
    checkpoints: int                # how many checkpoints hold it so
    kind: str | None = None         # None: the path was absent (removed at ``first``)
    size: int | None = None
    mtime_ns: int | None = None


class Found(msgspec.Struct, kw_only=True):
    path: str                       # TREE/PATH
    versions: list[Version]         # newest first


class FindResult(msgspec.Struct, kw_only=True):
    found: list[Found]
    manifests: int = 0              # checkpoints looked at
    skipped: list[str] = []         # checkpoints (or trees in them) that could not be read, and why


def find(view: View, pattern: str, tree: str | None = None, since: str | None = None) -> FindResult:
    """See the module docstring. A pattern holding ``/`` matches the whole TREE/PATH,
    any other the last name of the path (``fnmatch``: ``*`` also matches ``/``)."""
    since_seq, since_ns = (None, None) if since is None else parse_at(since, view.op, "--since")
    walker = _Walker(view, pattern)
    result = FindResult(found=[], skipped=view.skipped)
    current: dict[tuple[str, str], tuple[Version, Entry | None]] = {}
    history: dict[tuple[str, str], list[Version]] = {}
    seen_tree = False
    for seq in view.seqs:
        if since_seq is not None and seq < since_seq:
            continue
        try:
            manifest = view.manifest(seq)
        except DAMAGE as err:
            _skip(view, f"checkpoint {seq} is unreadable ({err})")
            continue
        if since_ns is not None and manifest.created_ns < since_ns:
            continue
        result.manifests += 1
        for name in sorted(manifest.trees) if tree is None else [tree]:
            root = manifest.trees.get(name)
            seen_tree = seen_tree or root is not None
            try:
                now = walker.matches(name, root.root) if root is not None and root.root is not None else {}
            except DAMAGE as err:
                _skip(view, f"tree {name} in checkpoint {seq} is unreadable ({err})")
                continue
            _advance(current, history, name, now, seq)
    if tree is not None and not seen_tree and result.manifests:
        raise BadBrowsePath(view.op, tree, "no checkpoint looked at holds such a tree; `journal ls` lists the trees")
    result.found = [Found(path=joined(*key), versions=list(reversed(versions)))
                    for key, versions in sorted(history.items())]
    return result


def _skip(view: View, note: str) -> None:
    view.skipped.append(note)
    view.reporter.warn(f"{view.op}: {note}; passed over")


def _advance(current: dict, history: dict, tree: str, now: dict[str, Entry], seq: int) -> None:
    """Record checkpoint ``seq``'s matches in tree ``tree``: a path whose entry (or
    absence) is what it was extends its version, any other starts a new one."""
    paths = set(now) | {path for (name, path) in current if name == tree}
    for path in paths:
        key, entry = (tree, path), now.get(path)
        version, was = current.get(key, (None, None))
        if version is not None and entry == was:
            version.last, version.checkpoints = seq, version.checkpoints + 1
            continue
        if version is None and entry is None:
            continue
        version = Version(first=seq, last=seq, checkpoints=1)
        if entry is not None:
            version.kind, version.size, version.mtime_ns = entry.kind, entry.size, entry.mtime_ns
        current[key] = (version, entry)
        history.setdefault(key, []).append(version)


class _Walker:
    """Each page's matches, read once, kept by (tree, page id): a page is the same
    subtree wherever it appears (its id covers its children's)."""

    def __init__(self, view: View, pattern: str):
        self.view = view
        self.whole = "/" in pattern
        self.pattern = pattern
        # (tree, page id) -> (what a parent must say of it, its children (an inner page) or its matches (a leaf))
        self.memo: dict[tuple[str, str], tuple[tuple, object]] = {}

    def match(self, tree: str, path: str) -> bool:
        name = joined(tree, path) if self.whole else path.rpartition("/")[2]
        return fnmatch.fnmatchcase(name, self.pattern)

    def matches(self, tree: str, root: BlobRef) -> dict[str, Entry]:
        """The matching entries of the tree under ``root``, by path."""
        out: dict[str, Entry] = {}
        stack = [(root, None)]
        while stack:
            ref, said = stack.pop()
            kept = self.memo.get((tree, ref.id))
            if kept is None:
                page = load_child(ref, said, self.view.fetch_page)
                if page.level:
                    kept = (page_span(page), page)
                else:
                    kept = (page_span(page), [(e.path, e) for e in page.entries if self.match(tree, e.path)])
                self.memo[(tree, ref.id)] = kept
            else:
                problem = said is not None and span_problem(kept[0], said)
                if problem:
                    raise CorruptObject(page_key(ref), problem)
            span, got = kept
            if span[0]:
                stack.extend(reversed(child_pages(got, ref, said)))
            else:
                out.update(got)
        return out
