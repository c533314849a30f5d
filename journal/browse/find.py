"""``journal find PATTERN``: for each path whose name matches a glob, the checkpoints
that hold it and where it changed, newest first.

The one command that reads every manifest (from ``--since`` on) and every tree in
them: but a page is read once however many checkpoints in a row share it (the same id:
the same subtree). Each page's matches are kept by id while the checkpoints go on
naming it, so a later checkpoint sharing it costs a lookup, and checking it against
what its parent says of it, never a read; what is kept is one checkpoint's pages per
tree, not every page of the history. A checkpoint whose manifest or index cannot be
read is passed over with a warning (the answer leaves it out; the command exits 3).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import NamedTuple

import msgspec

from ..errors import CorruptObject
from .errors import BadBrowsePath
from ..format.index import child_pages, load_child, page_key, page_span, span_problem
from ..format.model import BlobRef, Entry
from ..repository.moment import checkpoint_named, parse_moment
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


class PathHistory(NamedTuple):
    """What ``find_paths`` saw: the answer, the trees some checkpoint looked at holds,
    and each version's entry by (tree, path, the checkpoint it began at)."""

    result: FindResult
    trees: set[str]
    entries: dict[tuple[str, str, int], Entry]


def find(view: View, pattern: str, tree: str | None = None, since: str | None = None) -> FindResult:
    """See the module docstring. A pattern holding ``/`` matches the whole TREE/PATH,
    any other the last name of the path (``glob_regex``: ``*`` stops at ``/``, ``**``
    crosses it)."""
    walk = find_paths(view, _glob_matcher(pattern), None if tree is None else (tree,), since, entries=False)
    if tree is not None and tree not in walk.trees and walk.result.manifests:
        raise BadBrowsePath(view.op, tree, "no checkpoint looked at holds such a tree; `journal ls` lists the trees")
    return walk.result


def find_paths(view: View, match: Callable[[str, str], bool], trees: Collection[str] | None,
               since: str | None, *, entries: bool = True) -> PathHistory:
    """The versions of each path ``match(tree, path)`` keeps, in the trees ``trees``
    (None: every tree of each checkpoint), from checkpoint ``since`` on; with
    ``entries``, each version's entry too (a growing transcript has a new one at every
    checkpoint: ``find`` keeps none)."""
    moment = None if since is None else parse_moment(since, view.op, "--since")
    since_seq = None if moment is None else checkpoint_named(moment, view.seqs, view.is_fork, view.op, "--since")
    since_ns = None if moment is None else moment.first_ns
    walker = _Walker(view, match)
    result = FindResult(found=[], skipped=view.skipped)
    current: dict[tuple[str, str], tuple[Version, Entry | None]] = {}
    history: dict[tuple[str, str], list[Version]] = {}
    seen: set[str] = set()
    kept: dict[tuple[str, str, int], Entry] | None = {} if entries else None
    for seq in view.seqs:
        if since_seq is not None and seq < since_seq:
            continue
        try:
            manifest = view.manifest_once(seq)
        except DAMAGE as err:
            view.skip(f"checkpoint {seq} is unreadable ({err})")
            continue
        if since_ns is not None and manifest.created_ns < since_ns:
            continue
        result.manifests += 1
        for name in sorted(manifest.trees) if trees is None else trees:
            root = manifest.trees.get(name)
            if root is not None:
                seen.add(name)
            try:
                now = walker.matches(name, root.root) if root is not None and root.root is not None else {}
            except DAMAGE as err:
                view.skip(f"tree {name} in checkpoint {seq} is unreadable ({err})")
                continue
            _advance(current, history, kept, name, now, seq)
    result.found = [Found(path=joined(*key), versions=list(reversed(versions)))
                    for key, versions in sorted(history.items())]
    return PathHistory(result, seen, kept or {})


def _glob_matcher(pattern: str) -> Callable[[str, str], bool]:
    """``find``'s test of a path: ``pattern`` on the whole TREE/PATH when it holds
    ``/``, else on the path's last name."""
    regex = glob_regex(pattern)
    if "/" in pattern:
        return lambda tree, path: regex.match(joined(tree, path)) is not None
    return lambda tree, path: regex.match(path.rpartition("/")[2]) is not None


def _advance(current: dict, history: dict, entries: dict | None, tree: str, now: dict[str, Entry], seq: int) -> None:
    """Record checkpoint ``seq``'s matches in tree ``tree``: a path whose entry (or
    absence) is what it was extends its version, any other starts a new one (its entry
    kept in ``entries``, unless None)."""
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
            if entries is not None:
                entries[(tree, path, seq)] = entry
        current[key] = (version, entry)
        history.setdefault(key, []).append(version)


def glob_regex(pattern: str) -> re.Pattern:
    """A glob as a path matcher: ``*`` and ``?`` stop at ``/`` (``codex/*``: the entries
    right under ``codex``), ``**`` crosses it (``codex/**``: everything under it), and
    ``**/`` also matches no directory at all (``codex/**/*.jsonl`` holds
    ``codex/a.jsonl``); ``[...]`` and ``[!...]`` as ``fnmatch`` reads them."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] in "*?":
            out.append("[^/]*" if pattern[i] == "*" else "[^/]")
            i += 1
        elif pattern[i] == "[" and (end := _class_end(pattern, i)) > 0:
            inner = pattern[i + 1:end]
            body = re.sub(r"([\\&~|\[^])", r"\\\1", inner[1:] if inner.startswith("!") else inner)
            out.append(f"[^/{body}]" if inner.startswith("!") else f"[{body}]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z", re.S)


def _class_end(pattern: str, start: int) -> int:
    """Where the ``[...]`` opened at ``start`` ends (a ``]`` right after ``[`` or ``[!``
    is a member); -1 when it never does (the ``[`` is then a plain character)."""
    j = start + 1
    if j < len(pattern) and pattern[j] == "!":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    return pattern.find("]", j)


class _Walker:
    """Each page's matches, read once, kept by page id for the tree whose last walk met
    it: a page is the same subtree wherever it appears (its id covers its children's),
    and a checkpoint shares most pages with the one before. A page the last walk did
    not meet is dropped, so what is kept stays one version of each tree, however long
    the history (a page met again after that is read again)."""

    def __init__(self, view: View, match: Callable[[str, str], bool]):
        self.view = view
        self.match = match
        # tree -> page id -> (what a parent must say of it, its children (an inner page) or its matches (a leaf))
        self.memo: dict[str, dict[str, tuple[tuple, object]]] = {}

    def matches(self, tree: str, root: BlobRef) -> dict[str, Entry]:
        """The matching entries of the tree under ``root``, by path."""
        out: dict[str, Entry] = {}
        last, met = self.memo.get(tree, {}), {}
        stack = [(root, None)]
        while stack:
            ref, said = stack.pop()
            kept = last.get(ref.id) or met.get(ref.id)
            if kept is None:
                page = load_child(ref, said, self.view.fetch_page)
                if page.level:
                    kept = (page_span(page), page)
                else:
                    kept = (page_span(page), [(e.path, e) for e in page.entries if self.match(tree, e.path)])
            else:
                problem = said is not None and span_problem(kept[0], said)
                if problem:
                    raise CorruptObject(page_key(ref), problem)
            met[ref.id] = kept
            span, got = kept
            if span[0]:
                stack.extend(reversed(child_pages(got, ref, said)))
            else:
                out.update(got)
        self.memo[tree] = met
        return out
