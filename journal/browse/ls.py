"""``journal ls``: the entries of one checkpoint under a path, without restoring it.

Reads the manifest and only the index pages whose path range holds the listed
directory's own entries: a page that lies wholly inside a subdirectory already listed
is skipped unread (its entries are deeper). No data pack is read. ``--long`` adds, for
each entry, the checkpoint that last changed it: the walk goes back one manifest at a
time, comparing each listed entry with its copy there (every field: kind, mode, mtime,
size, blobs), and stops when every entry has found its change or after ``LOOKBACK``
manifests. A checkpoint whose tree root is the same page as the newer one's costs its
manifest only; otherwise only the pages on the paths of the entries still looked for
are read, and a page seen before (the same id) is not read again.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

import msgspec

from .errors import BadBrowsePath
from ..format.model import KIND_DIR, BlobRef, Entry, Manifest
from .view import DAMAGE, View
from .where import AFTER_SLASH, Where, joined, shown_path, subtree_prune

#: How many older manifests ``--long`` reads at most, per listing.
LOOKBACK = 100


class ListedEntry(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One listed entry (or, at the top, one tree)."""

    name: str
    path: str                       # as the commands name it: TREE/PATH
    kind: str                       # file, jsonl, symlink, dir, sqlite; "tree" at the top
    size: int = 0                   # bytes (a tree: all its files')
    mode: int | None = None         # permission bits (None: a directory only implied by the paths below it)
    mtime_ns: int | None = None
    target: str | None = None       # a symlink's
    files: int | None = None        # a tree's
    changed: int | None = None      # --long: the checkpoint that last changed it
    changed_exact: bool | None = None  # --long: False when it is unchanged as far back as the walk looked


class Listing(msgspec.Struct, kw_only=True):
    seq: int | None                 # the checkpoint listed (None: the store holds none)
    created: str | None
    path: str                       # what was listed ("" for the top: the trees)
    entries: list[ListedEntry]
    skipped: list[str] = []         # newer checkpoints passed over past damage (a fallback), and why


def list_path(view: View, where: Where, at: str | None = None, long: bool = False) -> Listing:
    """List ``where`` in the newest checkpoint at or before ``at`` (see the module docstring)."""
    if where.tree is None:
        if not view.seqs:
            return Listing(seq=None, created=None, path="", entries=[])
        seq, manifest = next(view.candidates(at))
        items = [ListedEntry(name=name, path=name, kind="tree", size=tree.bytes, files=tree.files)
                 for name, tree in sorted(manifest.trees.items())]
        if long:
            changed = _walk_back(view, seq, {i.name: _root_id(manifest, i.name) for i in items},
                                 lambda m, _names: {n: _root_id(m, n) for n in m.trees})
            for item in items:
                item.changed, item.changed_exact = changed[item.name]
        return Listing(seq=seq, created=manifest.created, path="", entries=items, skipped=view.skipped)
    tree, path = where
    seq, (own, names) = view.answer(at, tree, lambda _seq, root: children(view, root, path))
    if own is not None and own.kind != KIND_DIR:  # a file is listed as itself, as `ls FILE` does
        parent, found = path.rpartition("/")[0], {own.path.rpartition("/")[2]: own}
    elif own is None and not names and path:
        raise BadBrowsePath(view.op, str(where), f"not in checkpoint {seq}; `journal ls "
                                                 f"{shown_path(tree, path.rpartition('/')[0])}` lists what is there")
    else:
        parent, found = path, names
    pairs = [(_item(tree, name, entry, parent), entry) for name, entry in sorted(found.items())]
    if long:
        current = {entry.path: entry for _, entry in pairs if entry is not None}
        changed = entries_changed(view, seq, tree, current)
        for item, entry in pairs:
            if entry is not None:
                item.changed, item.changed_exact = changed[entry.path]
    return Listing(seq=seq, created=view.manifest(seq).created, path=joined(tree, path), entries=[i for i, _ in pairs],
                   skipped=view.skipped)


def _item(tree: str, name: str, entry: Entry | None, parent: str) -> ListedEntry:
    path = f"{parent}/{name}" if parent else name
    if entry is None:
        return ListedEntry(name=name, path=joined(tree, path), kind=KIND_DIR)
    return ListedEntry(name=name, path=joined(tree, path), kind=entry.kind, size=entry.size, mode=entry.mode,
                mtime_ns=entry.mtime_ns, target=entry.target)


def children(view: View, root: BlobRef | None, path: str) -> tuple[Entry | None, dict[str, Entry | None]]:
    """The entry at ``path`` (None for a tree's root, or a directory only implied by the
    paths below it) and the entries directly under it, by name (None: a directory only
    implied). Pages wholly inside a subdirectory already seen are skipped unread."""
    prefix = f"{path}/" if path else ""
    in_range = subtree_prune(path)
    own: Entry | None = None
    names: dict[str, Entry | None] = {}

    def prune(first: str, upper: str | None) -> bool:
        if in_range(first, upper):
            return True
        name, sep, _ = first[len(prefix):].partition("/")
        return (bool(sep) and first.startswith(prefix) and name in names and upper is not None
                and upper <= prefix + name + AFTER_SLASH)

    for entry in view.entries(root, prune):
        if entry.path == path:
            own = entry
        elif entry.path.startswith(prefix):
            name, sep, _ = entry.path[len(prefix):].partition("/")
            if sep:
                names.setdefault(name, None)
            else:
                names[name] = entry
    return own, names


def lookup(view: View, root: BlobRef | None, paths: list[str]) -> dict[str, Entry]:
    """The entries at ``paths`` (sorted) under ``root``, reading only the pages whose
    path range holds one of them."""
    wanted = set(paths)

    def prune(first: str, upper: str | None) -> bool:
        i = bisect.bisect_left(paths, first)
        return i == len(paths) or (upper is not None and paths[i] >= upper)

    return {e.path: e for e in view.entries(root, prune) if e.path in wanted}


def _root_id(manifest: Manifest, name: str) -> str | None:
    tree = manifest.trees.get(name)
    return None if tree is None or tree.root is None else tree.root.id


_ABSENT = object()


def _walk_back(view: View, seq: int, current: dict, identify: Callable[[Manifest, list], dict]) -> dict:
    """For each key of ``current`` (its identity at checkpoint ``seq``), ``(changed,
    exact)``: the oldest checkpoint from which it stayed as it is now, looking back at
    most ``LOOKBACK`` manifests; ``identify(manifest, keys)`` gives the keys' identities
    in an older one. ``exact`` is False when the walk stopped before finding the change
    (the bound, or older checkpoints expired by gc). A checkpoint that cannot be read
    is passed over: it says nothing."""
    pending, found, newer = dict(current), {}, seq
    older = [s for s in view.seqs if s < seq]
    ended = True
    for steps, old in enumerate(reversed(older)):
        if steps == LOOKBACK:
            ended = False
            break
        try:
            got = identify(view.manifest(old), sorted(pending))
        except DAMAGE:
            continue
        for key in list(pending):
            if got.get(key, _ABSENT) != pending[key]:
                found[key] = (newer, True)
                del pending[key]
        if not pending:
            break
        newer = old
    first = ended and view.seqs[0] == 1   # the walk reached the store's first checkpoint
    found.update({key: (newer, first) for key in pending})
    return found


def entries_changed(view: View, seq: int, tree: str, current: dict[str, Entry]) -> dict[str, tuple[int, bool]]:
    """``_walk_back`` for entries of ``tree``: an older checkpoint whose tree root is the
    same page (the same id) as one looked at before answers from that one, unread."""
    by_root: dict[str | None, dict[str, Entry]] = {}

    def identify(manifest: Manifest, paths: list[str]) -> dict[str, Entry]:
        tree_root = manifest.trees.get(tree)
        if tree_root is None:
            return {}
        key = None if tree_root.root is None else tree_root.root.id
        if key not in by_root:
            by_root[key] = lookup(view, tree_root.root, paths)
        return by_root[key]

    by_root[_root_id(view.manifest(seq), tree)] = dict(current)
    found = _walk_back(view, seq, current, identify)
    return {path: found[path] for path in current}
