"""Walking a live tree on local disk: os.scandir only, never the store."""

from __future__ import annotations

import fnmatch
import os
import re
import stat as stat_mod
from collections.abc import Iterator
from typing import NamedTuple

from ..presets import SQLITE_COMPANIONS
from .quiet import DIR as DIR_ROW, OTHER as OTHER_ROW, Row
from ..paths import shown
from .treepath import name_problem


class Item(NamedTuple):
    path: str               # relative, "/"-separated
    kind: str               # "file" | "symlink" | "dir" | "sqlite" | QUIET_ROW | UNREADABLE
    stat: os.stat_result | None
    quiet: Row | None = None  # QUIET_ROW: the directory's row (``same_paths`` tells its paths)
    error: OSError | None = None  # UNREADABLE: why


#: The kind of the one item for a directory the quiet snapshot found unchanged: every
#: path it includes (``same_paths``), taken as it was, without an ``lstat``.
QUIET_ROW = "quiet-row"
#: The kind of a path that exists but could not be listed or ``lstat``ed (permissions,
#: an I/O error, a path too long): what is under it keeps its last checkpoint.
UNREADABLE = "unreadable"


def _compile(patterns) -> tuple[re.Pattern | None, re.Pattern | None]:
    """One regex for the name patterns and one for the path patterns (``None``: none)."""
    names = [fnmatch.translate(p) for p in patterns if "/" not in p]
    paths = [fnmatch.translate(p) for p in patterns if "/" in p]
    return (re.compile("|".join(names)) if names else None, re.compile("|".join(paths)) if paths else None)


def _matches(compiled, path: str, name: str) -> bool:
    by_name, by_path = compiled
    return bool((by_name is not None and by_name.match(name)) or (by_path is not None and by_path.match(path)))


class Matcher:
    """Decides which paths a tree includes, and which are JSONL transcripts or SQLite.

    A pattern ending in ``/`` matches directories only. A pattern with a ``/`` is
    matched against the relative path, any other against the name alone. Patterns
    are compiled once into regexes (the walk tests every path).
    """

    def __init__(self, exclude: tuple[str, ...] = (), jsonl: tuple[str, ...] = (), sqlite: tuple[str, ...] = (),
                 own: frozenset[str] = frozenset()):
        self.own = own  # journal's temp directories in use in this tree, by relative path (``local/tree_tmp.py``)
        self.dirs = _compile([p.rstrip("/") for p in exclude if p.endswith("/")])
        self.files = _compile([p for p in exclude if not p.endswith("/")])
        self.jsonl = _compile(jsonl)
        self.sqlite = _compile(sqlite)
        self.has_sqlite = bool(sqlite)
        # When no file or sqlite pattern looks at the path, a file's fate depends on
        # its name alone; trees repeat names a lot, so decisions are remembered.
        self._by_name: dict[str, bool] | None = (
            {} if self.files[1] is None and self.sqlite[1] is None else None)

    def excluded(self, path: str, name: str, is_dir: bool) -> bool:
        if is_dir:
            return path in self.own or _matches(self.dirs, path, name) or _matches(self.files, path, name)
        memo = self._by_name
        if memo is not None:
            hit = memo.get(name)
            if hit is None:
                hit = memo[name] = _matches(self.files, path, name) or self.sqlite_companion(path, name)
            return hit
        return _matches(self.files, path, name) or self.sqlite_companion(path, name)

    def reaches(self, path: str) -> bool:
        """Whether the walk would reach the file ``path`` (relative, ``/``-separated):
        no directory on its way excluded, and the file itself not excluded."""
        parts = path.split("/")
        for i in range(1, len(parts)):
            if self.excluded("/".join(parts[:i]), parts[i - 1], True):
                return False
        return not self.excluded(path, parts[-1], False)

    def is_jsonl(self, path: str) -> bool:
        return _matches(self.jsonl, path, path.rsplit("/", 1)[-1])

    def is_sqlite(self, path: str, name: str) -> bool:
        return self.has_sqlite and _matches(self.sqlite, path, name)

    def sqlite_companion(self, path: str, name: str) -> bool:
        """A ``-wal``/``-shm``/``-journal`` file of a database the sqlite patterns match."""
        if not self.has_sqlite:
            return False
        for suffix in SQLITE_COMPANIONS:
            if name.endswith(suffix):
                if self.is_sqlite(path[: -len(suffix)], name[: -len(suffix)]):
                    return True
        return False


def walk_tree(root: str, matcher: Matcher, skipped: list[tuple[str, str]] | None = None,
              listing: list | None = None, same: dict[str, Row] | None = None) -> Iterator[Item]:
    """Yield the tree's directories, files and symlinks (in directory order; callers sort).

    Symlinks are never followed. Sockets, FIFOs and devices are skipped. A path that
    vanishes during the walk is skipped silently. A directory that cannot be listed, or
    a name that cannot be ``lstat``ed (and that the tree does not exclude), is yielded
    as an ``UNREADABLE`` item carrying the ``OSError`` (a path past ``PATH_MAX`` too). A
    name the path rule refuses (``local/treepath.py``: one that is not valid UTF-8) is
    skipped, with what is below it, and appended to ``skipped`` as (printable full
    path, why). With ``listing``, each visited directory
    appends ``(rel_dir, [(name, file type or None, yielded), ...])`` for every name in
    it, in ``readdir`` order (the type: ``stat.S_IFMT`` of its ``lstat``, None when that
    failed; ``local/quiet.py`` compares the listing at the next checkpoint).

    ``same`` maps a directory's relative path to its quiet snapshot row when the
    snapshot found it unchanged this tick (``quiet.same_rows``): such a directory is not
    listed again; it is one ``QUIET_ROW`` item whose ``quiet`` is the row (no item per
    name: 20,000 of them on a large one-change tick; ``same_paths`` tells the paths it
    includes), and ``listing`` gets ``(rel_dir, row)``.
    """
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        row = same.get(rel_dir) if same else None
        if row is not None:
            yield Item(rel_dir, QUIET_ROW, None, quiet=row)
            if listing is not None:
                listing.append((rel_dir, row))
            stack.extend(reversed(_row_subdirs(rel_dir, row)))
            continue
        try:
            with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as it:
                dirents = list(it)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as err:  # it exists, but cannot be listed this time
            yield Item(rel_dir, UNREADABLE, None, error=err)
            continue
        seen = [] if listing is not None else None
        subdirs = []
        for d in dirents:
            name = d.name
            rel = f"{rel_dir}/{name}" if rel_dir else name
            # Readdir never yields "", "." or "..", a "/" or a NUL, nor a name over
            # NAME_MAX: an ASCII name always passes the path rule.
            problem = None if name.isascii() else name_problem(name)
            try:
                st = None if problem else d.stat(follow_symlinks=False)
            except FileNotFoundError:
                st = None
            except OSError as err:  # it exists, but cannot be looked at this time
                st = None
                if not _excluded_entry(d, rel, matcher):
                    yield Item(rel, UNREADABLE, None, error=err)
            if problem is not None and skipped is not None:
                skipped.append((shown(os.path.join(root, rel)), problem))
            item = None if st is None else _classify(rel, d.name, st, matcher)
            if seen is not None:   # the type, not the stat: a tree's listing is held until its scan ends
                seen.append((d.name, None if st is None else _file_type(st.st_mode), item is not None))
            if item is not None:
                if item.kind == "dir":
                    subdirs.append(rel)
                yield item
        if listing is not None:
            listing.append((rel_dir, seen))
        stack.extend(reversed(subdirs))


#: Each file type as one shared object: a listing holds one per name.
_TYPES = {t: t for t in (stat_mod.S_IFREG, stat_mod.S_IFDIR, stat_mod.S_IFLNK, stat_mod.S_IFIFO, stat_mod.S_IFSOCK,
                         stat_mod.S_IFCHR, stat_mod.S_IFBLK)}


def _file_type(mode: int) -> int:
    kind = stat_mod.S_IFMT(mode)
    return _TYPES.get(kind, kind)


def same_paths(rel_dir: str, row: Row) -> tuple[list[str], int, list[str]]:
    """The paths a quiet snapshot row includes, in its order: every name with a
    signature (a file or a link) or with a directory's or a database's value (excluded
    names have neither); how many of them are no directory; the directories."""
    prefix = f"{rel_dir}/" if rel_dir else ""
    sigs = row.sigs
    kinds = {i: what for i, what, _value in row.others if what != OTHER_ROW}
    names = row.names
    paths = [prefix + name for i, name in enumerate(names) if sigs[i] is not None or i in kinds]
    subdirs = _row_subdirs(rel_dir, row)
    return paths, len(paths) - len(subdirs), subdirs


def _row_subdirs(rel_dir: str, row: Row) -> list[str]:
    """The directories a quiet snapshot row includes, in its order (``walk_tree`` needs
    only these of an unchanged directory)."""
    prefix = f"{rel_dir}/" if rel_dir else ""
    return [prefix + row.names[i] for i, what, _value in row.others if what == DIR_ROW]


def _excluded_entry(d: os.DirEntry, rel: str, matcher: Matcher) -> bool:
    """Whether the tree leaves out a name that cannot be ``lstat``ed, judged by the
    type ``readdir`` gave (when it gave none: excluded both as a directory and not)."""
    try:
        return matcher.excluded(rel, d.name, d.is_dir(follow_symlinks=False))
    except OSError:
        return matcher.excluded(rel, d.name, True) and matcher.excluded(rel, d.name, False)


def _classify(rel: str, name: str, st: os.stat_result, matcher: Matcher) -> Item | None:
    """The walk's item for one path, or None when the tree leaves it out."""
    if stat_mod.S_ISDIR(st.st_mode):
        return None if matcher.excluded(rel, name, True) else Item(rel, "dir", st)
    if stat_mod.S_ISREG(st.st_mode):
        if matcher.excluded(rel, name, False):
            return None
        return Item(rel, "sqlite" if matcher.is_sqlite(rel, name) else "file", st)
    if stat_mod.S_ISLNK(st.st_mode):
        return None if matcher.excluded(rel, name, False) else Item(rel, "symlink", st)
    return None
