"""What a mount shows, path by path: the checkpoints as directories, read as ``ls`` reads them.

    latest -> seq/N             the newest main-line checkpoint whose manifest reads
    seq/N/TREE/PATH             every checkpoint by its number, forks too
    time/TIME -> ../seq/N       one name per main-line checkpoint: the time it was made
                                (UTC, to the millisecond, rounded up); any other time or
                                duration ago (``moment.parse_time``) names the newest
                                main-line checkpoint made at or before it
    forks/N -> ../seq/N         the forks (design §11, "Lineage")

Everything is read through one ``View``: a manifest when a path names its checkpoint, and
the index pages of a directory when it is listed (``ls.children``: only the pages
holding that directory's own entries), each kept in a bounded cache. The listing of
``manifests/`` is read again at most once per ``refresh`` seconds, so new checkpoints
appear. What stays for the mount's life is a few numbers per checkpoint (``Facts``: when
it was made, whether it is a fork), so that ``time/`` and ``forks/`` need not read every
manifest again.

Nothing under ``seq/N`` changes while it is mounted: checkpoints are immutable. A
file's mode is its stored mode without the write bits; a directory only implied by the
paths below it is ``r-xr-xr-x``, as are the directories made up here.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import enum
import errno
import os
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from ...errors import ConfigError
from ...format.model import KIND_DIR, KIND_SYMLINK, BlobRef, Entry
from ...repository.moment import parse_time
from ..ls import children
from ..view import DAMAGE, View
from .lru import Lru

#: A made-up directory's mode, and what is kept of a stored mode: read and search only.
READ_ONLY = 0o555
TOP = ("latest", "seq", "time", "forks")


class NodeKind(enum.Enum):
    DIR = "dir"
    LINK = "link"
    FILE = "file"


class Node(NamedTuple):
    """One path of the mount: what ``getattr`` and ``readlink`` answer, and a file's entry."""

    kind: NodeKind
    mode: int                   # permission bits
    mtime_ns: int
    size: int = 0
    target: str = ""            # a link's
    entry: Entry | None = None  # a file's (file, jsonl or sqlite)


class Facts(NamedTuple):
    """What the mount keeps of a manifest once it has read it."""

    created_ns: int
    fork: bool


def time_name(ns: int) -> str:
    """The name of a checkpoint made at ``ns`` in ``time/``: its UTC time to the
    millisecond, rounded up, so that the name, read back as a time, names it."""
    ms = -(-ns // 1_000_000)
    when = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=ms)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _absent(path: str) -> OSError:
    return OSError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def _not_dir(path: str) -> OSError:
    return OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)


def _parts(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


def kind_of(entry: Entry | None) -> NodeKind:
    """The node an entry is (None: a directory only implied by the paths below it)."""
    if entry is None or entry.kind == KIND_DIR:
        return NodeKind.DIR
    return NodeKind.LINK if entry.kind == KIND_SYMLINK else NodeKind.FILE


def entry_node(entry: Entry | None, made_ns: int) -> Node:
    """The node of a tree's entry; an implied directory takes its checkpoint's time."""
    kind = kind_of(entry)
    if entry is None:
        return Node(kind, READ_ONLY, made_ns)
    if kind is NodeKind.LINK:
        return Node(kind, 0o777, entry.mtime_ns, len(os.fsencode(entry.target or "")), entry.target or "")
    if kind is NodeKind.DIR:  # a directory's time is not kept (0): its checkpoint's is shown
        return Node(kind, entry.mode & READ_ONLY, entry.mtime_ns or made_ns)
    return Node(kind, entry.mode & READ_ONLY, entry.mtime_ns, entry.size, entry=entry)


class Layout:
    """The mount's paths over ``view`` (see the module docstring). Safe from several
    threads: one lock orders every read of the view. ``listed``: how many directory
    entries the kept listings may hold in all; ``warn``: told of each checkpoint that
    ``latest``, ``time/`` and ``forks/`` pass over because its manifest is damaged."""

    def __init__(self, view: View, listed: int, refresh: float, warn: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic):
        self.view = view
        self.refresh = refresh
        self.started_ns = time.time_ns()
        self._warn = warn
        self._clock = clock
        self._listed_at: float | None = None
        self._facts: dict[int, Facts | Exception] = {}
        self._listings = Lru(listed, weigh=lambda names: len(names) + 1)
        self._lock = threading.RLock()

    @property
    def listings(self) -> Lru:
        """The directory listings kept, by (root page id, path)."""
        return self._listings

    def node(self, path: str) -> Node:
        """What ``path`` (``/seq/3/codex/a.txt``) is; ``OSError`` ENOENT when nothing is
        there, ``CorruptObject``/``ObjectNotFound`` when what says so is damaged."""
        parts = _parts(path)
        with self._lock:
            if not parts or parts in (["seq"], ["time"], ["forks"]):
                return Node(NodeKind.DIR, READ_ONLY, self.started_ns)
            top, rest = parts[0], parts[1:]
            if top == "seq":
                return self._in_checkpoint(self._seq(rest[0], path), rest[1:], path)
            if parts == ["latest"]:
                return self._link(f"seq/{self._latest(path)}")
            if top == "time" and len(rest) == 1:
                return self._link(f"../seq/{self._at_time(rest[0], path)}")
            if top == "forks" and len(rest) == 1 and self._fork(self._seq(rest[0], path)):
                return self._link(f"../seq/{rest[0]}")
            raise _absent(path)

    def names(self, path: str) -> list[tuple[str, NodeKind]]:
        """The names in directory ``path``, sorted, with what each is."""
        parts = _parts(path)
        with self._lock:
            if not parts:
                latest = self._newest_main()
                return [(name, NodeKind.LINK if name == "latest" else NodeKind.DIR)
                        for name in sorted(TOP) if name != "latest" or latest is not None]
            if parts == ["seq"]:
                return [(str(seq), NodeKind.DIR) for seq in self._seqs()]
            if parts == ["time"]:
                return [(name, NodeKind.LINK) for name in sorted(self._time_names())]
            if parts == ["forks"]:
                return [(str(seq), NodeKind.LINK) for seq in self._seqs() if self._fork(seq)]
            if parts[0] != "seq" or self.node(path).kind is not NodeKind.DIR:
                raise _not_dir(path)
            manifest = self.view.manifest(self._seq(parts[1], path))
            if len(parts) == 2:
                return [(name, NodeKind.DIR) for name in sorted(manifest.trees)]
            listing = self._listing(manifest.trees[parts[2]].root, "/".join(parts[3:]))
            return [(name, kind_of(entry)) for name, entry in sorted(listing.items())]

    # ----------------------------------------------------------------- checkpoints

    def _seqs(self) -> list[int]:
        """Every checkpoint, ascending; the listing read again once ``refresh`` has passed."""
        now = self._clock()
        if self._listed_at is None or now - self._listed_at >= self.refresh:
            self.view.forget_listing()
            self._listed_at = now
        return self.view.seqs

    def _seq(self, name: str, path: str) -> int:
        """The checkpoint ``name`` numbers (as ``seq/`` lists it: no leading zero)."""
        seqs = self._seqs()
        seq = int(name) if name.isascii() and name.isdigit() and str(int(name)) == name else -1
        i = bisect.bisect_left(seqs, seq)
        if i == len(seqs) or seqs[i] != seq:
            raise _absent(path)
        return seq

    def facts(self, seq: int) -> Facts:
        """When checkpoint ``seq`` was made and whether it is a fork; its manifest is read
        once for the mount's life (damage too is remembered)."""
        got = self._facts.get(seq)
        if got is None:
            try:
                manifest = self.view.manifest(seq)
            except DAMAGE as err:
                self._facts[seq] = err
                raise
            got = self._facts[seq] = Facts(manifest.created_ns, manifest.is_fork)
        if isinstance(got, Exception):
            raise got
        return got

    def _readable(self, seq: int) -> Facts | None:
        """``facts``, or None (and a warning, once) for a manifest that is damaged."""
        try:
            return self.facts(seq)
        except DAMAGE as err:
            self._warn(f"mount: checkpoint {seq} is unusable (its manifest: {err}); latest, time/ and forks/ pass "
                       "over it")
            return None

    def _fork(self, seq: int) -> bool:
        facts = self._readable(seq)
        return facts is not None and facts.fork

    def _newest_main(self, at_ns: int | None = None) -> int | None:
        """The newest main-line checkpoint made at or before ``at_ns`` (any, without it)."""
        for seq in reversed(self._seqs()):
            facts = self._readable(seq)
            if facts is not None and not facts.fork and (at_ns is None or facts.created_ns <= at_ns):
                return seq
        return None

    def _latest(self, path: str) -> int:
        seq = self._newest_main()
        if seq is None:
            raise _absent(path)
        return seq

    def _time_names(self) -> dict[str, int]:
        """``time/``'s names: two checkpoints in one millisecond are named once, for the newer."""
        return {time_name(facts.created_ns): seq for seq in self._seqs()
                if (facts := self._readable(seq)) is not None and not facts.fork}

    def _at_time(self, name: str, path: str) -> int:
        try:
            moment = parse_time(name, "mount", "time/")
        except ConfigError:
            raise _absent(path) from None
        seq = self._newest_main(moment.last_ns)
        if seq is None:
            raise _absent(path)
        return seq

    # ----------------------------------------------------------------- trees

    def _in_checkpoint(self, seq: int, rest: list[str], path: str) -> Node:
        """A node at or under ``seq/N``: the checkpoint, a tree, or a path in a tree."""
        if not rest:
            return Node(NodeKind.DIR, READ_ONLY, self.facts(seq).created_ns)
        manifest = self.view.manifest(seq)
        tree = manifest.trees.get(rest[0])
        if tree is None:
            raise _absent(path)
        if len(rest) == 1:
            return Node(NodeKind.DIR, READ_ONLY, manifest.created_ns)
        parent, name = "/".join(rest[1:-1]), rest[-1]
        listing = self._listing(tree.root, parent)
        if name not in listing:
            raise _absent(path)
        return entry_node(listing[name], manifest.created_ns)

    def _listing(self, root: BlobRef | None, path: str) -> dict[str, Entry | None]:
        """The entries right under ``path`` in the tree under ``root``, by name (None: a
        directory only implied), kept by (root page, path)."""
        if root is None:
            return {}
        key = (root.id, path)
        got = self._listings.get(key)
        if got is None:
            got = self._listings[key] = children(self.view, root, path)[1]
        return got

    def _link(self, target: str) -> Node:
        return Node(NodeKind.LINK, 0o777, self.started_ns, len(target), target)
